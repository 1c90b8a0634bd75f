"""Running a live source: batches of comments in, triaged and published, one status line out each.

A live source (YouTube, OneComme, standard input) is an async iterator of
batches of comments and moderation events; each batch is triaged together (one model call per batch when a model
classifies) and published with session ``live``, so a platform resend is stored
once even across restarts. Unlike ``kotae replay``, nothing waits for answers:
the command prints what ingest did with each comment and keeps going until the
source ends.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import IO

from nats.js import JetStreamContext

from kotae.bus.topology import ensure_streams
from kotae.logs import get_logger
from kotae.runtime import make_broker
from kotae.services.ingest.answer_cache import answer_cache_for
from kotae.services.ingest.handlers import Ingested, Ingestor
from kotae.services.ingest.sources import ChatItem
from kotae.services.ingest.triage import Triage
from kotae.settings import Settings
from kotae.tracing import build_tracer_provider

log = get_logger("kotae.ingest")

SourceFactory = Callable[[JetStreamContext], AsyncIterator[list[ChatItem]]]


def status_line(result: Ingested) -> str:
    """One JSONL line of ``kotae ingest youtube|onecomme``: what happened to a comment."""
    record = {
        "comment_id": result.comment_id,
        "status": result.status,
        "priority": result.priority,
        "reason": result.reason,
    }
    if result.duplicate:
        record["status"] = "resend"  # the bus had it already (a restart re-read a page)
    return json.dumps(record, ensure_ascii=False)


async def run_live(
    settings: Settings, url: str, source: SourceFactory, *, source_name: str, out: IO[str] | None = None
) -> Counter[str]:
    """Publish every batch ``source`` yields until it ends; returns counts by status."""
    out = out or sys.stdout
    provider = build_tracer_provider("ingest", settings)
    broker = make_broker(settings.model_copy(update={"nats_url": url}), tracer_provider=provider)
    await broker.connect()
    counts: Counter[str] = Counter()
    try:
        js = broker.connection.jetstream()
        await ensure_streams(js, settings)
        triage = Triage.from_settings(settings, source=source_name)
        cache = await answer_cache_for(js, settings, stream_id=triage.stream_id, kb=triage.kb, session="live")
        ingestor = Ingestor(
            broker,
            triage,
            provider.get_tracer("kotae.ingest"),
            session="live",
            clarify_ttl_s=settings.clarify_ttl_s,
            cache=cache,
        )
        try:
            async for batch in source(js):
                if not batch:
                    continue
                for result in await ingestor.ingest_many(batch):
                    line = status_line(result)
                    counts[json.loads(line)["status"]] += 1
                    out.write(line + "\n")
                out.flush()
        finally:
            await ingestor.close()
    finally:
        await broker.stop()
        provider.force_flush(5_000)
    log.info("ingest.source_ended", source=source_name, **counts)
    return counts
