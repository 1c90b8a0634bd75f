"""Feed comments through the real bus and collect each one's terminal outcome.

Used by ``kotae replay`` and ``kotae demo``. Outcomes are read from the answers
stream and the dead-letter stream. A comment the bus had already stored (same
platform id within JetStream's duplicate window) is not processed again; its
earlier outcome is reported instead.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import ConsumerConfig, DeliverPolicy
from opentelemetry.sdk.trace import TracerProvider

from kotae.contracts import AnswerV1, DeadLetterV1, EvaluationV1, subjects
from kotae.bus.topology import ensure_streams
from kotae.runtime import make_broker
from kotae.settings import Settings
from kotae.services.ingest.handlers import Ingestor
from kotae.services.ingest.sources import RawComment, Timing, paced
from kotae.services.ingest.triage import Triage
from kotae.tracing import build_tracer_provider


def _trace_id_from(headers: dict[str, str] | None) -> str | None:
    parent = (headers or {}).get("traceparent", "")
    parts = parent.split("-")
    return parts[1] if len(parts) == 4 else None


def answer_record(answer: AnswerV1, latency_ms: float | None, trace_id: str | None) -> dict[str, Any]:
    """One line of ``kotae replay --out`` for a comment that ended as an answer outcome."""
    return {
        "comment_id": answer.comment_id,
        "outcome": answer.outcome,
        "answer": answer.answer,
        "citations": [{"n": c.n, "doc_id": c.doc_id, "source": c.source, "slide": c.slide} for c in answer.citations],
        "slide": answer.slide,
        "verdict": answer.verdict,
        "reason": answer.reason,
        "latency_ms": None if latency_ms is None else round(latency_ms, 1),
        "trace_id": answer.trace_id or trace_id,
    }


def dead_letter_record(letter: DeadLetterV1, latency_ms: float | None, trace_id: str | None) -> dict[str, Any]:
    return {
        "comment_id": letter.comment_id,
        "outcome": "dead_lettered",
        "answer": None,
        "citations": [],
        "slide": None,
        "verdict": None,
        "reason": f"{letter.stage}: {letter.error_type}: {letter.error}",
        "latency_ms": None if latency_ms is None else round(latency_ms, 1),
        "trace_id": trace_id or _trace_id_from(letter.headers),
    }


@dataclass
class ReplayResult:
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    resends: int = 0
    answers: dict[str, AnswerV1] = field(default_factory=dict)
    evaluations: dict[str, EvaluationV1] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        return [cid for cid in self.order if cid not in self.records]

    def ordered(self) -> list[dict[str, Any]]:
        return [self.records[cid] for cid in self.order if cid in self.records]


async def run_replay(
    settings: Settings,
    url: str,
    comments: list[RawComment],
    *,
    timeout: float = 120.0,
    source: str = "replay",
    session: str | None = None,
    wait_for_evaluations: float = 0.0,
    tracer_provider: TracerProvider | None = None,
    timing: Timing = "fast",
    speed: float = 1.0,
) -> ReplayResult:
    """Publish ``comments`` through ingest's triage and wait for every outcome.

    Each run is its own ingest session, so replaying a file again processes it
    again; within the run, a repeated id is a resend and is published once.
    ``timing="original"`` publishes each comment after the gap its ``published_at``
    says (divided by ``speed``); ``"fast"`` publishes in batches of
    ``KOTAE_TRIAGE_BATCH_SIZE`` (one triage model call each, when a model classifies).
    """
    provider = tracer_provider or build_tracer_provider("ingest", settings)
    broker = make_broker(settings.model_copy(update={"nats_url": url}), tracer_provider=provider)
    await broker.connect()
    js = broker.config.connection_state.stream
    await ensure_streams(js, settings)  # a bus that no stage has declared yet still takes the comments
    result = ReplayResult()
    try:
        async def tail(stream: str, subject: str, cb: Any) -> Any:
            last = (await js.stream_info(stream)).state.last_seq
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last + 1)
            return await js.subscribe(subject, cb=cb, ordered_consumer=True, config=config)

        sent_at: dict[str, float] = {}
        origins: dict[str, str] = {}  # comment id -> message id of the comment we published
        answers: dict[tuple[str, str], tuple[AnswerV1, dict[str, Any]]] = {}
        letters: dict[str, DeadLetterV1 | Any] = {}
        published = asyncio.Event()
        done = asyncio.Event()
        evals_done = asyncio.Event()

        def settle() -> None:
            for cid, origin in origins.items():
                if cid in result.answers:
                    continue
                # An answer outcome wins over a dead letter: a stage that gives up
                # publishes a ``failed`` outcome and dead-letters the input too.
                found = answers.get((cid, origin))
                if found:
                    result.answers[cid] = found[0]
                    result.records[cid] = found[1]
                elif cid in letters and cid not in result.records:
                    result.records[cid] = letters[cid]
            if published.is_set() and not result.missing:
                done.set()
            if done.is_set() and set(result.answers) <= set(result.evaluations):
                evals_done.set()

        async def on_answer(msg: Any) -> None:
            try:
                answer = AnswerV1.model_validate_json(msg.data)
            except ValueError:
                return
            start = sent_at.get(answer.comment_id)
            latency = (time.time() - start) * 1000 if start else None
            record = answer_record(answer, latency, _trace_id_from(msg.headers))
            answers.setdefault((answer.comment_id, answer.comment.message_id), (answer, record))
            settle()

        async def on_letter(msg: Any) -> None:
            try:
                letter = DeadLetterV1.model_validate_json(msg.data)
            except ValueError:
                return
            if letter.comment_id and letter.comment_id in sent_at:
                latency = (time.time() - sent_at[letter.comment_id]) * 1000
                letters.setdefault(letter.comment_id, dead_letter_record(letter, latency, _trace_id_from(msg.headers)))
                settle()

        async def on_evaluation(msg: Any) -> None:
            try:
                ev = EvaluationV1.model_validate_json(msg.data)
            except ValueError:
                return
            result.evaluations[ev.comment_id] = ev
            settle()

        subs = [
            await tail(subjects.STREAM_ANSWERS, subjects.ANSWER_ALL, on_answer),
            await tail(subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL, on_letter),
        ]
        if wait_for_evaluations:
            subs.append(await tail(subjects.STREAM_EVALUATIONS, subjects.EVALUATION, on_evaluation))
        triage = Triage.from_settings(settings, source=source)
        ingestor = Ingestor(
            broker, triage, provider.get_tracer("kotae.ingest"),
            session=session or uuid.uuid4().hex[:12], clarify_ttl_s=settings.clarify_ttl_s,
        )
        batch: list[RawComment] = []

        async def flush() -> None:
            for outcome in await ingestor.ingest_many(batch):
                if outcome.origin:
                    origins[outcome.comment_id] = outcome.origin
            batch.clear()

        async for raw in paced(comments, timing, speed=speed):
            if raw.id in sent_at:
                result.resends += 1
                continue
            result.order.append(raw.id)
            sent_at[raw.id] = time.time()
            batch.append(raw)
            if timing == "original" or len(batch) >= triage.batch_size:
                await flush()
        await flush()
        published.set()
        settle()
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        if wait_for_evaluations and not result.missing:
            try:
                await asyncio.wait_for(evals_done.wait(), wait_for_evaluations)
            except asyncio.TimeoutError:
                pass
        for sub in subs:
            await sub.unsubscribe()
    finally:
        await broker.stop()
        provider.force_flush(5_000)
    return result


def write_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
