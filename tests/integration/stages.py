"""Run every stage's router in this process against a real nats-server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.nats import NatsBroker
from opentelemetry.sdk.trace import TracerProvider

from kotae.bus.topology import ensure_streams_at
from kotae.runtime import make_broker
from kotae.services.evaluator.handlers import build_router as evaluator
from kotae.services.generator.handlers import build_router as generator
from kotae.services.reranker.handlers import build_router as reranker
from kotae.services.retriever.handlers import build_router as retriever
from kotae.services.verifier.handlers import build_router as verifier
from kotae.settings import Settings

BUILDERS = {
    "retriever": retriever,
    "reranker": reranker,
    "generator": generator,
    "verifier": verifier,
    "evaluator": evaluator,
}


@asynccontextmanager
async def running_stages(
    settings: Settings,
    url: str,
    *,
    tracer_provider: TracerProvider | None = None,
    stages: tuple[str, ...] = tuple(BUILDERS),
) -> AsyncIterator[NatsBroker]:
    settings = settings.model_copy(update={"nats_url": url})
    await ensure_streams_at(url, settings)
    broker = make_broker(settings, tracer_provider=tracer_provider)
    for stage in stages:
        broker.include_router(BUILDERS[stage](settings))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
