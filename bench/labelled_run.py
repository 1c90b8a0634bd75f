"""One ``kotae eval`` run, as a user runs it, for the benches that measure the whole pipeline.

``kotae eval FILE… --kb KB --out … --json`` in a subprocess on a fresh ``KOTAE_DATA_DIR``
(the embedded default: nats-server and every stage as its own process, offline
methods unless the environment configures models), with ``KOTAE_ADMIT_PER_MINUTE=0`` so
that no question is lost to the chat-rate limit a live stream needs. Returns the
``--json`` result, the per-question records, and how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class EvalRun:
    sets: list[dict[str, Any]]
    evaluations: list[dict[str, Any]]
    records: list[dict[str, Any]]
    seconds: float
    stderr: str

    def by_id(self) -> dict[str, dict[str, Any]]:
        return {r["id"]: r for r in self.records}


def run_eval(
    files: list[Path],
    kb: Path,
    *,
    timeout_s: float = 3600.0,
    env: dict[str, str] | None = None,
    args: Sequence[str] = (),
) -> EvalRun:
    """``kotae eval`` over ``files`` with ``kb`` loaded first (``args``: more of its options, e.g. ``--timeout``);
    raises with kotae's message when it fails."""
    with tempfile.TemporaryDirectory(prefix="kotae-bench-eval-") as tmp:
        out = Path(tmp) / "per-question.jsonl"
        run_env = {**os.environ, "KOTAE_DATA_DIR": str(Path(tmp) / "data"), "KOTAE_ADMIT_PER_MINUTE": "0"}
        run_env.update(env or {})
        cmd = [
            sys.executable,
            "-m",
            "kotae",
            "eval",
            *map(str, files),
            "--kb",
            str(kb),
            "--out",
            str(out),
            "--json",
            *args,
        ]
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=run_env, timeout=timeout_s, cwd=ROOT)
        seconds = time.perf_counter() - started
        if done.returncode not in (0, 1) or not done.stdout.strip():
            raise SystemExit(f"kotae eval failed ({done.returncode}):\n{done.stderr[-4000:]}")
        result = json.loads(done.stdout)
        records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    return EvalRun(result["sets"], result["evaluations"], records, seconds, done.stderr)


def rate(num: float, den: float) -> str:
    """``12/300 (0.040)``: the counts first, so a small sample is not read as a bare rate."""
    return f"{num:g}/{den:g} ({num / den:.3f})" if den else f"{num:g}/0 (—)"
