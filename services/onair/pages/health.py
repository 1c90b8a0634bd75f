"""The stages' health for the console: which processes are up, and how far behind each stage is.

Two sources, each saying what it can see:

* **lag** — every consuming stage's durable consumer, listed from JetStream
  (``$JS.API.CONSUMER.LIST``, the one consumer API the on-air stage's user may
  call on other stages' streams): messages not yet delivered (``pending``),
  delivered and not yet acknowledged (``in_flight``), and the pull requests its
  processes have open (``pulling``: an idle process keeps one, so 0 with work
  pending means nobody is taking it);
* **processes** — the ready files that stage processes sharing this data folder
  keep while they run (``KOTAE_DATA_DIR/run/<stage>-<pid>.ready``, as ``kotae up``
  runs them), counted when their process is still alive. A deployment whose
  processes run on other hosts shows only this host's here; its lag is still
  the whole stage's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
import structlog
from nats.js import JetStreamContext

from kotae.stage import Stage

log = structlog.get_logger("kotae.onair")

#: The console asks at most this often; JetStream is asked once for all viewers.
REFRESH_S = 2.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, but alive
    return True


def processes_up(run_dir: Path, stages: Sequence[str]) -> dict[str, int]:
    """Live processes per stage, from their ready files (a file whose process died does not count)."""
    up = dict.fromkeys(stages, 0)
    try:
        files = list(run_dir.glob("*.ready"))
    except OSError:
        return up
    for path in files:
        stage, _, pid = path.stem.rpartition("-")
        if stage in up and pid.isdigit() and _alive(int(pid)):
            up[stage] += 1
    return up


class StageHealth:
    """Lag and processes of every stage, refreshed at most every :data:`REFRESH_S`.

    Example::

        health = StageHealth(STAGES, settings.data_dir / "run")
        await health.read(js)   # {"stages": [{"stage": "retriever", "processes": 1, "pending": 0, ...}], ...}
    """

    def __init__(self, stages: Sequence[Stage], run_dir: Path) -> None:
        self.stages = [s for s in stages if s.runs_as_process]
        self.run_dir = run_dir
        self._at = 0.0
        self._last: dict[str, Any] | None = None
        self._lock = asyncio.Lock()

    async def _lag(self, js: JetStreamContext) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        streams = dict.fromkeys(s.consumes.stream for s in self.stages if s.consumes is not None)
        for stream in streams:
            try:
                infos = await js.consumers_info(stream)
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.Error) as exc:
                log.debug("onair.health_unavailable", stream=stream, error=type(exc).__name__)
                continue
            for info in infos:
                found[f"{stream}/{info.name}"] = {
                    "pending": int(info.num_pending or 0),
                    "in_flight": int(info.num_ack_pending or 0),
                    "pulling": int(info.num_waiting or 0),
                    "redelivered": int(info.num_redelivered or 0),
                }
        return found

    async def read(self, js: JetStreamContext | None) -> dict[str, Any]:
        async with self._lock:
            if self._last is not None and time.monotonic() - self._at < REFRESH_S:
                return self._last
            lag = await self._lag(js) if js is not None else {}
            up = processes_up(self.run_dir, [s.name for s in self.stages])
            rows = []
            for stage in self.stages:
                row: dict[str, Any] = {"stage": stage.name, "processes": up.get(stage.name, 0)}
                if stage.consumes is not None:
                    consumer = lag.get(f"{stage.consumes.stream}/{stage.durable}")
                    row.update(consumer or {"pending": None, "in_flight": None, "pulling": None})
                rows.append(row)
            self._last = {"stages": rows, "lag_seen": bool(lag), "processes_from": str(self.run_dir)}
            self._at = time.monotonic()
            return self._last
