"""CPU a stage process spends on one message, with and without a trace exporter.

    python bench/stage_cpu.py [--messages 2000] [--stage reranker]

Starts nats-server and one stage process (offline methods, so the figure is the
cost of kotae's bus edge, contracts and tracing rather than of a model), feeds it
the stage's golden input message ``--messages`` times as fast as it takes them,
and reads the process's CPU seconds from /proc. Two runs: with no trace exporter
(the embedded default: spans are not recorded, the trace id still travels) and
with ``KOTAE_OTLP_ENDPOINT`` pointing at a local collector that accepts every
export (what a production deployment with Grafana Tempo pays).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import nats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from pipeline import cpu_seconds  # noqa: E402

from kotae.bus.embedded import EmbeddedNats  # noqa: E402
from kotae.bus.topology import ensure_streams  # noqa: E402
from kotae.contracts import subjects  # noqa: E402
from kotae.services import STAGES as DECLARED  # noqa: E402
from kotae.settings import load_settings  # noqa: E402
from kotae.stage import hot_path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "contracts" / "golden"
#: Per model-calling hop after the retrieval gate: its golden input, the subject it takes, what it passes on.
STAGES = {
    hop.stage.name: (
        f"{hop.takes.removeprefix(subjects.PREFIX + '.')}.json",
        hop.takes,
        hop.passes if hop.passes != subjects.ANSWER_PREFIX else subjects.ANSWER_PREFIX + ".>",
    )
    for hop in hot_path(DECLARED)[1:]
}


class _Collector(BaseHTTPRequestHandler):
    """Accepts OTLP/HTTP exports and counts them (it does not decode them)."""

    received = 0

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).received += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def message(template: dict[str, Any], i: int) -> bytes:
    m = json.loads(json.dumps(template))
    cid = f"cpu{i}-{uuid.uuid4().hex[:6]}"
    m["comment_id"], m["message_id"] = cid, uuid.uuid4().hex
    if isinstance(m.get("comment"), dict):
        m["comment"]["comment_id"], m["comment"]["message_id"] = cid, uuid.uuid4().hex
    return json.dumps(m).encode()


async def one_run(stage: str, n: int, otlp: str | None) -> tuple[float, float]:
    """(stage CPU ms per message, messages per second) for ``n`` messages."""
    golden, inbound, outbound = STAGES[stage]
    template = json.loads((GOLDEN / golden).read_text(encoding="utf-8"))
    work = Path(tempfile.mkdtemp(prefix="kotae-stage-cpu-"))
    server = EmbeddedNats(work / "jetstream")
    url = server.start()
    env = dict(
        os.environ,
        KOTAE_NATS_URL=url,
        KOTAE_DATA_DIR=str(work),
        KOTAE_LOG_LEVEL="warning",
        KOTAE_RERANKER_OFFLINE="keep_top_n",
        KOTAE_INFLIGHT="128",
        OMP_NUM_THREADS="1",
    )
    env.pop("KOTAE_OTLP_ENDPOINT", None)
    if otlp:
        env["KOTAE_OTLP_ENDPOINT"] = otlp
    nc = await nats.connect(url)
    proc = None
    try:
        js = nc.jetstream()
        await ensure_streams(js, load_settings(nats_url=url, data_dir=work), update=True)
        proc = subprocess.Popen([sys.executable, "-m", "kotae", "serve", stage], env=env)
        got = 0
        target = asyncio.Event()

        async def on(_msg: Any) -> None:
            nonlocal got
            got += 1
            if got >= want:
                target.set()

        await nc.subscribe(outbound, cb=on)
        want = 50  # warm-up: imports, connections, first validations
        for i in range(want):
            await js.publish(inbound, message(template, 10**6 + i))
        await asyncio.wait_for(target.wait(), 120)
        got, want = 0, n
        target.clear()
        cpu0, started = cpu_seconds(proc.pid), time.monotonic()
        for i in range(n):
            await js.publish(inbound, message(template, i))
        await asyncio.wait_for(target.wait(), 300)
        elapsed = time.monotonic() - started
        return 1000 * (cpu_seconds(proc.pid) - cpu0) / n, n / elapsed
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        await nc.close()
        server.stop()


async def main_async(args: argparse.Namespace) -> str:
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    rows = []
    try:
        for name, otlp in (("no exporter (embedded default)", None), ("OTLP exporter (local collector)", endpoint)):
            cpu, rate = await one_run(args.stage, args.messages, otlp)
            rows.append(f"| {name} | {cpu:.2f} | {rate:.0f} |")
    finally:
        collector.shutdown()
    return "\n".join(
        [
            f"Machine: {describe()}",
            "",
            f"{args.stage} (offline method), {args.messages} messages fed as fast as it takes them; "
            f"the collector received {_Collector.received} exports.",
            "",
            "| tracing | stage CPU ms per message | messages/s |",
            "|---|---:|---:|",
            *rows,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--stage", choices=list(STAGES), default=next(iter(STAGES)))
    args = parser.parse_args()
    print(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
