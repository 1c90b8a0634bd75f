"""Ingest latency: a YouTube chat message offered → its ``comment.v1`` on the bus, by streamList and by polling.

Against the fakes of the tests (``tests/fakes``): the in-process gRPC ``streamList`` server, and
the Data API HTTP server answering ``liveChatMessages.list`` with a fixed ``pollingIntervalMillis``.
Each run starts a real nats-server, runs ``kotae ingest youtube``'s own loop (``run_live``: triage,
publish with publish ack) on one transport, offers questions to the fake chat at random moments
(exponential gaps), and times each from the moment the fake holds it to the moment a subscriber of
``kotae.comment.v1`` receives it. Merging and the admission limit are off, so every offered question
is admitted.

Quota: streamList spends 5 units a connection, ``list`` 5 units a call; the table gives what each
run spent and what a 3-hour stream spends each way (``videos.list``: 1 unit once).

    python bench/ingest_latency.py [--messages 60] [--gap 0.5] [--intervals 5000,2000] [--hours 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import nats  # noqa: E402
from machine import describe  # noqa: E402
from pydantic import SecretStr  # noqa: E402

from kotae.bus.embedded import EmbeddedNats  # noqa: E402
from kotae.contracts import subjects  # noqa: E402
from kotae.services.ingest.live import run_live  # noqa: E402
from kotae.services.ingest.state import KvState  # noqa: E402
from kotae.services.ingest.youtube import YouTubeLiveChat  # noqa: E402
from kotae.services.ingest.youtube_stream import YouTubeChatStream  # noqa: E402
from kotae.settings import Settings, load_settings  # noqa: E402
from tests.fakes.youtube_server import FakeYouTubeServer, text_message  # noqa: E402
from tests.fakes.youtube_stream_server import FakeStreamList  # noqa: E402

TOPICS = [
    "保育料",
    "バス代",
    "期日前投票",
    "ごみの日",
    "図書館",
    "宿泊税",
    "港の再開発",
    "児童手当",
    "水道料金",
    "駐輪場",
]


class PolledChat(FakeYouTubeServer):
    """The HTTP fake as a live chat: token ``p<k>`` = after the first k messages, every page the same interval."""

    def __init__(self, interval_ms: int) -> None:
        super().__init__([])
        self.interval_ms = interval_ms
        self.items: list[dict[str, Any]] = []
        self.offered_at: dict[str, float] = {}
        self.offline = False
        self._lock = threading.Lock()  # the server answers from its own threads

    def offer(self, item: dict[str, Any]) -> None:
        with self._lock:
            self.items.append(item)
            self.offered_at[item["id"]] = time.perf_counter()

    def _page(self, token: str | None) -> dict[str, Any]:
        start = int(token[1:]) if token and token.startswith("p") else 0
        with self._lock:
            items = self.items[start:]
            body: dict[str, Any] = {
                "kind": "youtube#liveChatMessageListResponse",
                "items": items,
                "nextPageToken": f"p{start + len(items)}",
                "pollingIntervalMillis": self.interval_ms,
            }
            if self.offline and not items:
                body["offlineAt"] = "2026-11-30T12:00:00Z"
        return body


def question(i: int) -> dict[str, Any]:
    return text_message(f"q{i}", f"{TOPICS[i % len(TOPICS)]}について質問{i}、いくらですか？")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_run(settings: Settings, url: str, transport: str, interval_ms: int, n: int, gap: float) -> dict[str, Any]:
    """Offer ``n`` questions to a fake chat read by ``transport``; latency of each to the bus, and quota spent."""
    arrived: dict[str, float] = {}
    done = asyncio.Event()
    nc = await nats.connect(url)

    async def on_comment(msg: Any) -> None:
        arrived.setdefault(json.loads(msg.data)["comment_id"], time.perf_counter())
        if len(arrived) >= n:
            done.set()

    await nc.subscribe(subjects.COMMENT, cb=on_comment)
    http = PolledChat(interval_ms)
    rng = random.Random(39 + interval_ms)
    readers: list[Any] = []
    with http:
        async with FakeStreamList([]) as grpc_chat:
            s = settings.model_copy(update={"youtube_base_url": http.url, "youtube_stream_target": grpc_chat.target})

            def source(js: Any) -> Any:
                async def pages() -> Any:
                    state = await KvState.open(js, s.ingest_kv_bucket)
                    if transport == "stream":
                        reader: Any = YouTubeChatStream.from_settings(s, http.video_id, state)
                    else:
                        reader = YouTubeLiveChat.from_settings(s, http.video_id, state)
                    readers.append(reader)
                    try:
                        async for page in reader.pages():
                            yield page
                    finally:
                        await reader.aclose()

                return pages()

            task = asyncio.create_task(run_live(s, url, source, source_name="youtube", out=open("/dev/null", "w")))
            await asyncio.sleep(1.0)  # connected (or first poll made) before the first message
            started = time.perf_counter()
            for i in range(n):
                await asyncio.sleep(rng.expovariate(1 / gap))
                if transport == "stream":
                    await grpc_chat.post(question(i))
                else:
                    http.offer(question(i))
            await asyncio.wait_for(done.wait(), timeout=60 + interval_ms / 1000 * 3)
            elapsed = time.perf_counter() - started
            if transport == "stream":
                await grpc_chat.end()
                offered = grpc_chat.offered_at
            else:
                http.offline = True
                offered = http.offered_at
            await asyncio.wait_for(task, timeout=30 + interval_ms / 1000 * 2)
    await nc.close()
    latencies = [arrived[i] - offered[i] for i in offered if i in arrived]
    reader = readers[0]
    return {
        "latencies": latencies,
        "calls": reader.calls,
        "units": reader.quota.used,
        "elapsed": elapsed,
        "transport": getattr(reader, "transport", "poll"),
    }


def projected_units(transport: str, interval_ms: int, hours: float, video_cost: int = 1, call_cost: int = 5) -> int:
    """Units a stream of ``hours`` spends: one connection for streamList, one call per interval for polling."""
    if transport == "stream":
        return video_cost + call_cost
    return video_cost + call_cost * int(hours * 3600 / (interval_ms / 1000))


async def bench(args: argparse.Namespace) -> list[str]:
    folder = Path(tempfile.mkdtemp(prefix="kotae-ingest-latency-"))
    server = EmbeddedNats(folder / "jetstream", sync_interval="2m")
    url = server.start()
    rows = []
    try:
        settings = load_settings(
            data_dir=folder / "data",
            nats_url=url,
            merge_window_s=0,
            admit_per_minute=0,
            youtube_api_key=SecretStr("bench-key"),
            youtube_quota_per_day=10_000_000,  # the latency at the interval itself; the budget is projected below
            author_salt=SecretStr("bench-salt"),
        )
        runs = [("stream", 0)] + [("poll", int(ms)) for ms in args.intervals.split(",")]
        for transport, interval_ms in runs:
            s = settings.model_copy(update={"ingest_kv_bucket": f"bench_{transport}_{interval_ms}"})
            result = await one_run(s, url, transport, interval_ms, args.messages, args.gap)
            lat = result["latencies"]
            name = "streamList" if transport == "stream" else f"list, pollingIntervalMillis {interval_ms}"
            rows.append(
                f"| {name} | {len(lat)} | {statistics.median(lat):.3f} | {pct(lat, 0.95):.3f} | {max(lat):.3f} "
                f"| {result['calls']} in {result['elapsed']:.0f} s | {result['units']} "
                f"| {projected_units(transport, interval_ms, args.hours):,} |"
            )
            print(rows[-1], file=sys.stderr)
    finally:
        server.stop()
    head = [
        f"| transport | n | p50 s | p95 s | max s | calls | units spent | units for a {args.hours:g}-hour stream |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return head + rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=60, help="questions offered per transport")
    parser.add_argument("--gap", type=float, default=0.5, help="mean seconds between offered questions")
    parser.add_argument("--intervals", default="5000,2000", help="pollingIntervalMillis of the polling runs")
    parser.add_argument("--hours", type=float, default=3.0, help="stream length of the quota projection")
    args = parser.parse_args()
    print(f"Machine: {describe()}\n")
    print(
        f"Offered → comment.v1 on a real nats-server, {args.messages} questions a transport, "
        f"exponential gaps of mean {args.gap} s:\n"
    )
    print("\n".join(asyncio.run(bench(args))))


if __name__ == "__main__":
    main()
