"""Run stages in this process against a real nats-server, exactly as ``kotae serve`` runs each one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from faststream.nats import NatsBroker
from opentelemetry.sdk.trace import TracerProvider

from kotae.bus.topology import ensure_streams_at
from kotae.runtime import ServiceProcess, StageProcess, make_broker
from kotae.services import STAGES
from kotae.settings import Settings
from kotae.stage import by_name

#: Every stage ``kotae up`` runs unless asked for more, in pipeline order.
PROCESS_STAGES = tuple(stage.name for stage in STAGES if stage.runs_as_process and not stage.on_request)


@asynccontextmanager
async def running_stages(
    settings: Settings,
    url: str,
    *,
    tracer_provider: TracerProvider | None = None,
    stages: tuple[str, ...] = PROCESS_STAGES,
) -> AsyncIterator[NatsBroker]:
    settings = settings.model_copy(update={"nats_url": url})
    await ensure_streams_at(url, settings)
    broker = make_broker(settings, tracer_provider=tracer_provider)
    declared = by_name(STAGES)
    processes: list[StageProcess | ServiceProcess] = [
        ServiceProcess(declared[name], settings, broker, tracer_provider=tracer_provider, exit_on_end=False)
        if declared[name].service
        else StageProcess(declared[name], settings, broker, tracer_provider=tracer_provider)
        for name in stages
    ]
    await broker.start()
    try:
        for process in processes:
            await process.start()
        yield broker
    finally:
        for process in processes:
            await process.stop()
        await broker.stop()
