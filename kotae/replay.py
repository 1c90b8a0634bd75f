"""Feed comments through the real bus and collect each one's terminal outcome.

Used by ``kotae replay`` and ``kotae demo``. Outcomes are read from the answers
stream and the dead-letter stream. A comment the bus had already stored (same
platform id within JetStream's duplicate window) is not processed again; its
earlier outcome is reported instead.

With ``onair``, the on-air events are read too: each record gains ``air`` (what
the on-air stage did with the comment's verified answer: its final outcome, when
it was queued, started and came off air, its audio's length, the reason; None
for a comment that was not verified), and the replay waits until every verified
answer has its final air outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from nats.js.api import ConsumerConfig, DeliverPolicy
from opentelemetry.sdk.trace import TracerProvider

from kotae.bus.topology import ensure_streams
from kotae.contracts import AnswerV1, DeadLetterV1, EvaluationV1, OnAirEventV1, subjects
from kotae.runtime import make_broker
from kotae.services.ingest.answer_cache import answer_cache_for
from kotae.services.ingest.handlers import Ingestor
from kotae.services.ingest.sources import ChatItem, RawComment, Timing, paced
from kotae.services.ingest.triage import Triage
from kotae.settings import Settings
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


FINAL_AIR = frozenset(subjects.AIR_OUTCOMES)


def _iso(at: Any) -> str | None:
    return at.isoformat() if at is not None else None


def air_record(events: list[OnAirEventV1]) -> dict[str, Any] | None:
    """The ``air`` field of a replay record: what the on-air stage did with one answer (None: nothing final yet)."""
    final = next((e for e in reversed(events) if e.event in FINAL_AIR), None)
    if final is None:
        return None
    queued = next((e for e in events if e.event == "queued"), None)
    started = [e for e in events if e.event == "started"]
    last = started[-1] if started else None
    return {
        "outcome": final.event,
        "queued_at": _iso(queued.created_at if queued else None),
        "started_at": _iso(last.started_at if last else None),
        "finished_at": _iso(final.created_at if last else None),
        # The final event carries the whole answer's audio; started, only its first sentence's.
        "audio_ms": (final.audio_ms if final.audio_ms is not None else last.audio_ms) if last else None,
        "reason": final.reason,
    }


@dataclass
class ReplayResult:
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    resends: int = 0
    answers: dict[str, AnswerV1] = field(default_factory=dict)
    evaluations: dict[str, EvaluationV1] = field(default_factory=dict)
    #: With ``onair``: the on-air events of each comment's answer, in the order they were stored.
    air: dict[str, list[OnAirEventV1]] | None = None

    @property
    def missing(self) -> list[str]:
        return [cid for cid in self.order if cid not in self.records]

    @property
    def unaired(self) -> list[str]:
        """Verified comments whose answer has no final air outcome yet (with ``onair``)."""
        if self.air is None:
            return []
        return [
            cid
            for cid in self.order
            if cid in self.answers
            and self.answers[cid].outcome == "verified"
            and air_record(self.air.get(cid, [])) is None
        ]

    def ordered(self) -> list[dict[str, Any]]:
        records = [self.records[cid] for cid in self.order if cid in self.records]
        if self.air is None:
            return records
        return [{**r, "air": air_record(self.air.get(r["comment_id"], []))} for r in records]


class _Collector:
    """Each published comment's terminal outcome (and evaluation), as the streams deliver them.

    An answer outcome wins over a dead letter: a stage that gives up publishes a
    ``failed`` outcome and dead-letters the input too.
    """

    def __init__(self, result: ReplayResult) -> None:
        self.result = result
        self.sent_at: dict[str, float] = {}
        self.origins: dict[str, str] = {}  # comment id -> message id of the comment we published
        self.answers: dict[tuple[str, str], tuple[AnswerV1, dict[str, Any]]] = {}
        self.letters: dict[str, dict[str, Any]] = {}
        self.air_events: dict[str, list[OnAirEventV1]] = {}  # answer message id -> its on-air events
        self.published = asyncio.Event()
        self.done = asyncio.Event()
        self.evaluated = asyncio.Event()

    def _latency_ms(self, comment_id: str | None) -> float | None:
        start = self.sent_at.get(comment_id or "")
        return (time.time() - start) * 1000 if start else None

    def settle(self) -> None:
        result = self.result
        for cid, origin in self.origins.items():
            if cid in result.answers:
                continue
            found = self.answers.get((cid, origin))
            if found:
                result.answers[cid] = found[0]
                result.records[cid] = found[1]
            elif cid in self.letters and cid not in result.records:
                result.records[cid] = self.letters[cid]
        if result.air is not None:
            for cid, answer in result.answers.items():
                result.air[cid] = self.air_events.get(answer.message_id, [])
        if self.published.is_set() and not result.missing and not result.unaired:
            self.done.set()
        if self.done.is_set() and set(result.answers) <= set(result.evaluations):
            self.evaluated.set()

    async def on_answer(self, msg: Any) -> None:
        try:
            answer = AnswerV1.model_validate_json(msg.data)
        except ValueError:
            return
        record = answer_record(answer, self._latency_ms(answer.comment_id), _trace_id_from(msg.headers))
        self.answers.setdefault((answer.comment_id, answer.comment.message_id), (answer, record))
        self.settle()

    async def on_letter(self, msg: Any) -> None:
        try:
            letter = DeadLetterV1.model_validate_json(msg.data)
        except ValueError:
            return
        if letter.comment_id and letter.comment_id in self.sent_at:
            record = dead_letter_record(letter, self._latency_ms(letter.comment_id), _trace_id_from(msg.headers))
            self.letters.setdefault(letter.comment_id, record)
            self.settle()

    async def on_air(self, msg: Any) -> None:
        try:
            event = OnAirEventV1.model_validate_json(msg.data)
        except ValueError:
            return
        if event.answer_message_id:
            self.air_events.setdefault(event.answer_message_id, []).append(event)
            self.settle()

    async def on_evaluation(self, msg: Any) -> None:
        try:
            ev = EvaluationV1.model_validate_json(msg.data)
        except ValueError:
            return
        self.result.evaluations[ev.comment_id] = ev
        self.settle()


async def _tail(js: Any, stream: str, subject: str, cb: Any) -> Any:
    """An ordered consumer of what ``stream`` stores on ``subject`` from now on."""
    last = (await js.stream_info(stream)).state.last_seq
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last + 1)
    return await js.subscribe(subject, cb=cb, ordered_consumer=True, config=config)


async def _publish(
    ingestor: Ingestor, comments: list[ChatItem], collector: _Collector, *, timing: Timing, speed: float
) -> None:
    """Triage and publish every comment once (a repeated id is a resend), in batches unless timed;
    moderation events in their place among them."""
    batch: list[ChatItem] = []

    async def flush() -> None:
        for outcome in await ingestor.ingest_many(batch):
            if outcome.origin and outcome.status != "moderation":
                collector.origins[outcome.comment_id] = outcome.origin
        batch.clear()

    async for raw in paced(comments, timing, speed=speed):
        if not isinstance(raw, RawComment):
            batch.append(raw)
            if timing == "original":
                await flush()
            continue
        if raw.id in collector.sent_at:
            collector.result.resends += 1
            continue
        collector.result.order.append(raw.id)
        collector.sent_at[raw.id] = time.time()
        batch.append(raw)
        if timing == "original" or len(batch) >= ingestor.triage.batch_size:
            await flush()
    await flush()


async def _wait(event: asyncio.Event, timeout: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout)


async def run_replay(
    settings: Settings,
    url: str,
    comments: list[ChatItem],
    *,
    timeout: float = 120.0,
    source: str = "replay",
    session: str | None = None,
    wait_for_evaluations: float = 0.0,
    tracer_provider: TracerProvider | None = None,
    timing: Timing = "fast",
    speed: float = 1.0,
    onair: bool = False,
) -> ReplayResult:
    """Publish ``comments`` through ingest's triage and wait for every outcome.

    Each run is its own ingest session, so replaying a file again processes it
    again; within the run, a repeated id is a resend and is published once.
    ``timing="original"`` publishes each comment after the gap its ``published_at``
    says (divided by ``speed``); ``"fast"`` publishes in batches of
    ``KOTAE_TRIAGE_BATCH_SIZE`` (one triage model call each, when a model classifies).
    ``onair``: also wait for each verified answer's final air outcome (records gain ``air``).
    """
    provider = tracer_provider or build_tracer_provider("ingest", settings)
    broker = make_broker(settings.model_copy(update={"nats_url": url}), tracer_provider=provider)
    await broker.connect()
    js = broker.connection.jetstream()
    await ensure_streams(js, settings)  # a bus that no stage has declared yet still takes the comments
    result = ReplayResult(air={} if onair else None)
    collector = _Collector(result)
    try:
        subs = [
            await _tail(js, subjects.STREAM_ANSWERS, subjects.ANSWER_ALL, collector.on_answer),
            await _tail(js, subjects.STREAM_DEADLETTER, subjects.DEADLETTER_ALL, collector.on_letter),
        ]
        if wait_for_evaluations:
            subs.append(await _tail(js, subjects.STREAM_EVALUATIONS, subjects.EVALUATION, collector.on_evaluation))
        if onair:
            subs.append(await _tail(js, subjects.STREAM_ONAIR, subjects.ONAIR_ALL, collector.on_air))
        triage = Triage.from_settings(settings, source=source)
        session = session or uuid.uuid4().hex[:12]
        ingestor = Ingestor(
            broker,
            triage,
            provider.get_tracer("kotae.ingest"),
            session=session,
            clarify_ttl_s=settings.clarify_ttl_s,
            cache=await answer_cache_for(js, settings, stream_id=triage.stream_id, kb=triage.kb, session=session),
        )
        await _publish(ingestor, comments, collector, timing=timing, speed=speed)
        collector.published.set()
        collector.settle()
        await _wait(collector.done, timeout)
        if wait_for_evaluations and not result.missing:
            await _wait(collector.evaluated, wait_for_evaluations)
        await ingestor.close()
        for sub in subs:
            await sub.unsubscribe()
    finally:
        await broker.stop()
        provider.force_flush(5_000)
    return result


def write_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
