"""Comments replayed through a whole stack while its stage processes are killed: the delivery figures.

    python bench/chaos.py --comments 1000 [--gap 0.05] [--signal kill|term] [--rolling] [--seed N]

Starts nats-server and every stage as its own process (``Stack``), loads the
bundled sample knowledge base, and replays ``--comments`` comments (the sample
chat, cycled, one viewer each) at ``--gap`` seconds apart. Meanwhile each stage's
process in turn gets SIGKILL (or SIGTERM) at a random moment and a replacement
is started. Afterwards the answers and dead-letter streams are read back with
an ordered consumer and every comment is counted: exactly one terminal
outcome, duplicates, lost (no outcome; a dead letter alone counts as lost),
dead-lettered, and verified answers without a check. Prints a Markdown table
and the machine. Exit code 1 when a promise was broken.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from machine import describe  # noqa: E402

from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import load_records  # noqa: E402
from kotae.stack import Stack  # noqa: E402
from tests.reliability.harness import (  # noqa: E402
    CHAOS_ENV,
    SAMPLES,
    StageKiller,
    chaos_settings,
    environment,
    generated_comments,
    replay_under_faults,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--comments", type=int, default=1000, help="comments to replay (default 1000)")
    p.add_argument("--gap", type=float, default=0.05, help="seconds between comments (default 0.05)")
    p.add_argument("--signal", choices=["kill", "term"], default="kill", help="SIGKILL (crash) or SIGTERM (drain)")
    p.add_argument("--rolling", action="store_true", help="start each replacement before signalling the old process")
    p.add_argument(
        "--interval",
        type=float,
        nargs=2,
        default=(1.0, 2.5),
        metavar=("MIN", "MAX"),
        help="seconds between faults, drawn uniformly (default 1.0 2.5)",
    )
    p.add_argument("--seed", type=int, default=20261130)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every outcome")
    p.add_argument("--ack-wait", type=float, default=4.0, help="KOTAE_ACK_WAIT_S of the stages (default 4)")
    return p.parse_args(argv)


async def run(args: argparse.Namespace, data_dir: Path) -> int:
    # Info logs: the injector knows a replacement serves when its log says stage.started.
    env = {**CHAOS_ENV, "KOTAE_ACK_WAIT_S": str(args.ack_wait), "KOTAE_LOG_LEVEL": "info"}
    with environment(env):
        settings = chaos_settings(data_dir, env)
        load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
        stack = Stack(settings)
        await stack.start()
        try:
            sig = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
            killer = StageKiller(
                stack, random.Random(args.seed), sig=sig, interval=tuple(args.interval), overlap=args.rolling
            )
            comments = generated_comments(args.comments, prefix="bench-", gap_s=args.gap)
            chaos = await replay_under_faults(stack, settings, comments, killer, timeout=args.timeout)
        finally:
            stack.stop()
    figures = chaos.ledger.figures()
    per_stage: dict[str, int] = {}
    for fault in chaos.faults:
        per_stage[fault.stage] = per_stage.get(fault.stage, 0) + 1
    print(
        f"## chaos: {args.comments} comments, SIG{args.signal.upper()}{' rolling' if args.rolling else ''}, "
        f"seed {args.seed}, gap {args.gap}s, ack wait {args.ack_wait}s\n"
    )
    print(figures.table())
    print(f"| faults per stage | {', '.join(f'{k} {v}' for k, v in per_stage.items())} |")
    codes = Counter("none (hung)" if f.exit_code is None else str(f.exit_code) for f in chaos.faults)
    print(f"| exit codes of signalled processes | {', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))} |")
    print(f"| every stage serving afterwards | {all(chaos.running.values())} |")
    print(f"| consumers settled | {chaos.settled} |")
    print(f"| wall time | {chaos.seconds:.0f} s |")
    print(f"\nmachine: {describe()}")
    problems = chaos.ledger.problems()
    if problems != "(none)":
        print("\nbroken promises:\n" + problems)
    broken = figures.lost or figures.duplicates or figures.unchecked_verified or not all(chaos.running.values())
    return 1 if broken else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kotae-chaos-") as tmp:
        code = asyncio.run(run(args, Path(tmp) / "data"))
    print(f"(bench wall time {time.monotonic() - started:.0f} s, pid {os.getpid()})", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
