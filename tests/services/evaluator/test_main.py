"""The evaluator process yields the CPU to the answering stages."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def niceness(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[16])


def test_the_evaluator_runs_at_a_lower_priority_than_the_stages(nats_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "KOTAE_NATS_URL": nats_url, "KOTAE_DATA_DIR": str(tmp_path), "KOTAE_EVALUATOR_NICE": "7"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kotae", "serve", "evaluator"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = niceness(os.getpid())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and niceness(proc.pid) == base:
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert niceness(proc.pid) == min(19, base + 7)
    finally:
        proc.terminate()
        proc.wait(30)
