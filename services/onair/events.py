"""The on-air events, built from a queue entry (or an FAQ record) and published with their guarantees.

Each event goes to ``kotae.onair.v1.<event>`` with a ``Nats-Msg-Id`` that makes
the bus store it once however often it is sent:

* ``queued``: one per answer;
* ``started``: one per answer and attempt (an answer interrupted by a takeover is
  started again, as attempt 2); ``sentence``: one per next sentence of an attempt;
* every final outcome of one answer shares one id, so an answer can never end
  twice, whichever speaker sends it.

Each event is published inside a span whose parent is the comment's trace
context (the answer's ``traceparent``), so the airing shows in the comment's trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faststream.nats import NatsBroker
from opentelemetry import context as otel_context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kotae import metrics
from kotae.contracts import Citation, OnAirEventV1, subjects
from kotae.knowledge.records import KBRecord
from kotae.services.onair.policy import Entry
from kotae.services.onair.question import shown_question
from kotae.tracing import current_trace_id

_PROPAGATOR = TraceContextTextMapPropagator()
FINAL = frozenset(subjects.AIR_OUTCOMES)


def about(entry: Entry, event: str, **fields: Any) -> OnAirEventV1:
    """An event about a queued answer, carrying what the overlay and the console show of it."""
    answer, comment = entry.answer, entry.answer.comment
    question, withheld = shown_question(comment)
    base: dict[str, Any] = dict(
        comment_id=answer.comment_id,
        stream_id=answer.stream_id,
        event=event,
        kind="answer",
        answer_message_id=answer.message_id,
        question=question,
        question_withheld=withheld,
        answer=answer.answer,
        lang=comment.lang,
        citations=list(answer.citations),
        slide=answer.slide,
        author=comment.author,
        author_name=comment.author_name,
        askers=list(entry.askers),
        tier=entry.tier,
        superchat=comment.superchat,
        verdict=answer.verdict,
        received_at=comment.created_at,
        verified_at=answer.created_at,
        trace_id=answer.trace_id,
    )
    if entry.thanks is not None:
        # A thanks names the viewer and never shows or reads their message; it cites nothing.
        base.update(
            kind="thanks",
            question=None,
            question_withheld="a thanks: the viewer's message is neither shown nor read",
            answer=None,
            citations=[],
            slide=None,
            credited_to=entry.thanks.credited_to,
        )
    base.update(fields)
    return OnAirEventV1(**base)


def about_faq(record: KBRecord, stream_id: str, event: str, **fields: Any) -> OnAirEventV1:
    """An event about an FAQ entry aired while the chat was quiet: its answer, cited to itself."""
    citation = Citation(n=1, doc_id=record.id, source=record.source, slide=record.slide)
    base: dict[str, Any] = dict(
        comment_id=f"faq:{record.id}",
        stream_id=stream_id,
        event=event,
        kind="faq",
        question=record.question,
        answer=f"{record.answer}[1]",
        lang=record.language,
        citations=[citation],
        slide=record.slide,
        askers=[],
    )
    base.update(fields)
    return OnAirEventV1(**base)


def msg_id(event: OnAirEventV1) -> str:
    """The event's ``Nats-Msg-Id``: one queued, one started per attempt, one final per answer.

    An FAQ entry may air again in a later stream, so its ids also name when that airing started.
    """
    if event.kind == "faq":
        at = event.started_at.timestamp() if event.started_at else 0.0
        step = "final" if event.event in FINAL else event.event
        return f"onair:{event.comment_id}:{at:.3f}:{step}"
    key = event.answer_message_id or event.comment_id
    if event.event == "started":
        return f"onair:{key}:started:{event.attempt}"
    if event.event == "sentence":
        n = event.sentence.n if event.sentence is not None else 0
        return f"onair:{key}:sentence:{event.attempt}:{n}"
    if event.event in FINAL:
        return f"onair:{key}:final"
    return f"onair:{key}:{event.event}"


@dataclass(frozen=True)
class Published:
    """What the stream said about one publish: its sequence, and whether it already had the event."""

    seq: int
    duplicate: bool


class EventPublisher:
    """Publishes on-air events to their subjects and waits until the stream stored them.

    ``applied`` is told of each event the stream stored for the first time (the
    state applies it at once, not when the stream delivers it back).
    """

    def __init__(
        self,
        broker: NatsBroker,
        *,
        replica: str,
        tracer_provider: TracerProvider | None = None,
        applied: Callable[[OnAirEventV1], Any] | None = None,
        holds: Callable[[], bool] | None = None,
        show: Callable[[], str | None] | None = None,
    ) -> None:
        self.broker = broker
        self.replica = replica
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("kotae.onair")
        self.applied = applied
        #: Asked before each publish: an on-air process that is no longer sure of its lease says nothing.
        self.holds = holds
        #: The show every event is stamped with (what a later show's processes leave aside).
        self.show = show
        for outcome in FINAL:  # exported at 0, so the first of each is an increase() to Prometheus
            metrics.AIR_OUTCOMES.labels(outcome)

    async def publish(self, event: OnAirEventV1, traceparent: str | None = None) -> Published | None:
        """Publish ``event``; None when this process may no longer speak (the lease is gone)."""
        if self.holds is not None and not self.holds():
            return None
        event = event.model_copy(
            update={"replica": self.replica, "show_id": self.show() if self.show else event.show_id}
        )
        parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else otel_context.get_current()
        token = otel_context.attach(parent)
        try:
            with self.tracer.start_as_current_span(
                f"onair {event.event}",
                attributes={
                    "kotae.stage": "onair",  # as every stage's spans: the dashboards' trace search finds them
                    "kotae.comment_id": event.comment_id,
                    "kotae.onair.event": event.event,
                },
            ):
                if event.trace_id is None:
                    event = event.model_copy(update={"trace_id": current_trace_id()})
                subject = subjects.onair(event.event)
                ack = await self.broker.publish(
                    event.model_dump_json().encode(),
                    subject,
                    stream=subjects.STREAM_ONAIR,
                    headers={"Nats-Msg-Id": msg_id(event), "content-type": "application/json"},
                    correlation_id=event.comment_id,
                    timeout=10.0,
                )
        finally:
            otel_context.detach(token)
        published = Published(int(getattr(ack, "seq", 0) or 0), bool(getattr(ack, "duplicate", False)))
        if not published.duplicate:
            if event.event in FINAL:
                metrics.AIR_OUTCOMES.labels(event.event).inc()
            if self.applied is not None:
                self.applied(event)
        return published
