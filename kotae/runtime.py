"""Building a stage process: settings, logging, tracing, broker, app.

Every stage's ``main.py`` is ``build_app()`` over its router; this module holds
what they share so a stage folder shows only its own logic and wiring.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
from collections.abc import Coroutine, Iterable
from typing import Any

from faststream import FastStream
from faststream.specification import AsyncAPI
from faststream.nats import NatsBroker, NatsRouter
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from kotae import __version__
from kotae.bus.access import DEFAULT_NATS_URL, broker_options, refuse_on_tls_error, without_credentials
from kotae.bus.topology import ensure_streams
from kotae.logs import configure_logging, get_logger
from kotae.settings import Settings
from kotae.tracing import TraceContextMiddleware, build_tracer_provider, records_spans


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


# The chat model setting each stage calls, if any (its SDK is imported before the heap is frozen).
STAGE_MODEL_SETTING = {
    "retriever": "rewrite_model", "reranker": "reranker_model", "generator": "generator_model",
    "verifier": "verifier_model", "evaluator": "evaluator_model",
}


def settle_heap(service: str, settings: Settings) -> int:
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
    spec = getattr(settings, STAGE_MODEL_SETTING.get(service, ""), None)
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
        # whatever is unfinished then is handed back (nak) for another replica (see StageEdge).
        graceful_timeout=15.0,
    )
    return broker


def build_stage_app(
    service: str,
    routers: Iterable[NatsRouter],
    settings: Settings,
    *,
    tracer_provider: TracerProvider | None = None,
    description: str = "",
) -> FastStream:
    """A FastStream app for one stage: declares the streams, then consumes."""
    configure_logging(settings, service=service)
    provider = tracer_provider or build_tracer_provider(service, settings)
    if tracer_provider is None:
        # Spans made outside the broker middleware (model calls, retrieval steps) use the
        # process-wide provider, so they land in the same trace and exporter.
        trace.set_tracer_provider(provider)
    broker = make_broker(settings, tracer_provider=provider)
    for router in routers:
        broker.include_router(router)
    app = FastStream(
        broker,
        logger=None,
        specification=AsyncAPI(title=f"kotae {service}", version=__version__, description=description),
    )
    log = get_logger(f"kotae.{service}")

    @app.on_startup
    async def _declare_streams() -> None:
        await broker.connect()
        await ensure_streams(broker.config.connection_state.stream, settings)

    @app.after_startup
    async def _started() -> None:
        if settings.metrics_port is not None:
            from kotae.metrics import serve_metrics

            serve_metrics(settings.metrics_port)
        log.info(
            "stage.started", service=service, nats=without_credentials(settings.nats_url or DEFAULT_NATS_URL),
            inflight=settings.inflight, metrics_port=settings.metrics_port,
        )

    @app.on_shutdown
    async def _stopping() -> None:
        log.info("stage.stopping", service=service)

    @app.after_shutdown
    async def _release() -> None:
        from kotae.providers import close_models  # model SDKs load only in stages that call a model

        await close_models()
        provider.force_flush(5_000)

    return app
