"""Building a stage process: settings, logging, tracing, broker, app.

Every stage's ``main.py`` is ``build_app()`` over its router; this module holds
what they share so a stage folder shows only its own logic and wiring.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import os
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.specification import AsyncAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from kotae import __version__, metrics
from kotae.bus.connection import DEFAULT_NATS_URL, broker_options, refuse_on_tls_error, without_credentials
from kotae.bus.edge import StageEdge
from kotae.bus.pull import PullLoop
from kotae.bus.topology import ensure_streams
from kotae.logs import configure_logging, get_logger
from kotae.providers import ChatModel
from kotae.settings import Settings
from kotae.stage import Bus, Handler, ServiceContext, Stage
from kotae.tracing import TraceContextMiddleware, build_tracer_provider, records_spans

#: How long in-flight handlers get to finish on SIGTERM before the rest is handed back.
GRACEFUL_TIMEOUT_S = 15.0


class _StageBroker(NatsBroker):
    """A NatsBroker that remembers whether it ever connected (see ``refuse_on_tls_error``)."""

    connected_once = False

    async def connect(self) -> Any:
        connection = await super().connect()
        self.connected_once = True
        return connection


def run_loop(main: Coroutine[Any, Any, Any], settings: Settings) -> Any:
    """Run a long-lived process's main coroutine on the configured event loop.

    uvloop (libuv) costs a stage a fraction of asyncio's time per event-loop turn, and
    a message takes a dozen turns between the socket and the handler
    (``bench/pipeline.py``, docs/benchmarks.md). ``KOTAE_EVENT_LOOP=asyncio`` opts out.
    """
    if settings.event_loop != "asyncio":
        try:
            import uvloop
        except ImportError:
            if settings.event_loop == "uvloop":
                main.close()
                raise RuntimeError("KOTAE_EVENT_LOOP=uvloop but uvloop is not installed (pip install uvloop)") from None
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def settle_heap(stage: Stage, settings: Settings) -> int:
    """Take what start-up built out of the garbage collector's walks; return how many objects that is.

    A stage holds ~240,000 objects once FastStream, pydantic and a model SDK are
    loaded, and a full collection walks every one of them with the event loop
    stopped (100-400 ms here). With dozens of comments waiting on model calls,
    enough of each message's objects outlive the young generations that a full
    collection ran every few seconds in each model stage. Frozen, the start-up
    objects (modules, classes, validators, the SDK's types) are never walked again,
    and what each message allocates is collected as before. The stage's model SDK
    is imported first (it is otherwise loaded on the first call), so it is frozen too.
    Only for a stage that is its own process (``kotae serve``): frozen objects stay
    for the life of the process.
    """
    spec = getattr(settings, stage.model_setting, None) if stage.model_setting else None
    if spec:
        importlib.import_module("anthropic" if str(spec).startswith("anthropic:") else "openai")
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def make_broker(settings: Settings, *, tracer_provider: TracerProvider | None = None) -> NatsBroker:
    """A NATS broker whose messages carry W3C trace context in their headers.

    With a provider that records spans, FastStream's telemetry middleware makes a span of
    every publish and every message handled; otherwise the context is only passed on.
    """
    middlewares: list[Any] = [TraceContextMiddleware]
    if tracer_provider is not None and records_spans(tracer_provider):
        middlewares = [NatsTelemetryMiddleware(tracer_provider=tracer_provider)]
    options = broker_options(settings)
    broker = _StageBroker(
        **options,
        error_cb=refuse_on_tls_error(settings, while_=lambda: not broker.connected_once),
        logger=None,
        middlewares=middlewares,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        # On SIGTERM, in-flight handlers get this long to finish before the process exits;
        # whatever is unfinished then is handed back (nak) for another replica (see PullLoop).
        graceful_timeout=GRACEFUL_TIMEOUT_S,
    )
    return broker


class StageProcess:
    """One stage running on a broker: its handler, its edge (publishers) and its pull loop.

    Example::

        process = StageProcess(STAGE, settings, broker)   # before broker.start()
        await broker.start()
        await process.start()
        ...
        await process.stop()                               # before broker.stop()
    """

    def __init__(
        self,
        stage: Stage,
        settings: Settings,
        broker: NatsBroker,
        *,
        handler: Handler[Any] | None = None,
        graceful_timeout: float = GRACEFUL_TIMEOUT_S,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.stage = stage
        self.broker = broker
        model = ChatModel.configured(settings, stage.model_setting) if stage.model_setting else None
        self.model_name = model.name if model is not None else None
        self.handler = handler or stage.build_handler(settings, Bus(lambda: broker.connection.jetstream()))
        self.edge = StageEdge(stage, settings, self.handler, tracer_provider=tracer_provider)
        broker.include_router(self.edge.router(in_memory_subscriber=False))
        self.pull = PullLoop(self.edge, graceful_timeout=graceful_timeout)

    async def start(self) -> None:
        metrics.prime(self.stage.name, self.model_name)
        if self.handler.start is not None:
            await self.handler.start()
        await self.pull.start(self.broker.connection.jetstream())

    async def stop(self) -> None:
        await self.pull.stop()
        if self.handler.close is not None:
            await self.handler.close()


def ready_file(settings: Settings, stage: str, pid: int) -> Path:
    """Where a stage's process says it is ready, until it stops (``kotae up`` waits for a service stage's;
    the on-air console counts them to show which processes are up)."""
    return settings.data_dir / "run" / f"{stage}-{pid}.ready"


class ServiceProcess:
    """One process of a service stage (see :class:`kotae.stage.Stage`): its service, run as a task.

    Example::

        process = ServiceProcess(STAGE, settings, broker, tracer_provider=provider)
        await broker.start()
        await process.start()      # returns once the service said it is ready
        ...
        await process.stop()       # tells it to stop; cancels it after the graceful timeout

    A service that ends by itself, or fails, stops the process (SIGTERM to itself),
    so whatever supervises it starts a new one.
    """

    def __init__(
        self,
        stage: Stage,
        settings: Settings,
        broker: NatsBroker,
        *,
        graceful_timeout: float = GRACEFUL_TIMEOUT_S,
        tracer_provider: TracerProvider | None = None,
        exit_on_end: bool = True,
    ) -> None:
        self.stage = stage
        self.settings = settings
        self.broker = broker
        self.graceful_timeout = graceful_timeout
        self.exit_on_end = exit_on_end
        self.context = ServiceContext(broker=broker, tracer_provider=tracer_provider or TracerProvider())
        self.task: asyncio.Task[None] | None = None
        self._stopping = False
        self._log = get_logger(f"kotae.{stage.name}")

    async def start(self, timeout: float = 60.0) -> None:
        metrics.prime(self.stage.name)
        service = self.stage.load_service()
        self.task = asyncio.create_task(service(self.settings, self.context), name=f"{self.stage.name}-service")
        self.task.add_done_callback(self._ended)
        ready = asyncio.ensure_future(self.context.ready.wait())
        done, _ = await asyncio.wait({ready, self.task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            if self.task.done():
                self.task.result()  # raises what the service raised
            raise RuntimeError(f"{self.stage.name} was not ready after {timeout:.0f}s")

    def _ended(self, task: asyncio.Task[None]) -> None:
        if self._stopping:
            return
        error = None if task.cancelled() else task.exception()
        self._log.error("service.ended", service=self.stage.name, error=repr(error) if error else None)
        if self.exit_on_end:
            os.kill(os.getpid(), signal.SIGTERM)

    async def stop(self) -> None:
        self._stopping = True
        self.context.stopping.set()
        if self.task is None or self.task.done():
            return
        _, late = await asyncio.wait({self.task}, timeout=self.graceful_timeout)
        if late:
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task


def build_stage_app(stage: Stage, settings: Settings, *, tracer_provider: TracerProvider | None = None) -> FastStream:
    """A FastStream app for one stage: declares the streams, then pulls its consumer (or runs its service)."""
    service = stage.name
    configure_logging(settings, service=service)
    provider = tracer_provider or build_tracer_provider(service, settings)
    if tracer_provider is None:
        # Spans made outside the broker middleware (model calls, retrieval steps) use the
        # process-wide provider, so they land in the same trace and exporter.
        trace.set_tracer_provider(provider)
    broker = make_broker(settings, tracer_provider=provider)
    process: StageProcess | ServiceProcess
    if stage.service is not None:
        process = ServiceProcess(stage, settings, broker, tracer_provider=provider)
    else:
        process = StageProcess(stage, settings, broker, tracer_provider=provider)
    ready = ready_file(settings, service, os.getpid())
    app = FastStream(
        broker,
        logger=None,
        specification=AsyncAPI(title=f"kotae {service}", version=__version__, description=stage.description),
    )
    log = get_logger(f"kotae.{service}")

    @app.on_startup
    async def _declare_streams() -> None:
        niceness = getattr(settings, stage.nice_setting, 0) if stage.nice_setting else 0
        if niceness:
            os.nice(niceness)  # this process is the stage's own
        await broker.connect()
        await ensure_streams(broker.connection.jetstream(), settings)

    @app.after_startup
    async def _started() -> None:
        await process.start()
        ready.parent.mkdir(parents=True, exist_ok=True)
        ready.write_text(f"{os.getpid()}\n", encoding="utf-8")
        if settings.metrics_port is not None:
            from kotae.metrics import serve_metrics

            serve_metrics(settings.metrics_port, budget_usd_per_hour=settings.model_budget_usd_per_hour)
        log.info(
            "stage.started",
            service=service,
            nats=without_credentials(settings.nats_url or DEFAULT_NATS_URL),
            inflight=settings.inflight,
            metrics_port=settings.metrics_port,
        )

    @app.on_shutdown
    async def _stopping() -> None:
        log.info("stage.stopping", service=service)
        ready.unlink(missing_ok=True)
        await process.stop()  # hands back what it did not finish while the connection is still open

    @app.after_shutdown
    async def _release() -> None:
        from kotae.providers import close_models  # model SDKs load only in stages that call a model

        await close_models()
        provider.force_flush(5_000)

    return app


def lazy_app(stage: Stage) -> Any:
    """A module ``__getattr__`` giving ``app`` on first access, so ``faststream run module:app`` works
    and importing the module builds nothing."""

    def __getattr__(name: str) -> Any:
        if name == "app":
            from kotae.settings import get_settings

            return build_stage_app(stage, get_settings())
        raise AttributeError(name)

    return __getattr__
