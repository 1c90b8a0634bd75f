"""Ingest's bus edge: publish admitted comments, and the dropped ones' outcomes.

Each comment is published inside an ``ingest`` span, which becomes the root of
the comment's trace; the FastStream telemetry middleware carries it onward in
``traceparent``. The platform's message id is the ``Nats-Msg-Id``, so a resend
within JetStream's duplicate window is stored once.
"""

from __future__ import annotations

from dataclasses import dataclass

from faststream.nats import NatsBroker
from opentelemetry.trace import Tracer

from kotae.bus.edge import msg_id
from kotae.contracts import AnswerV1, CommentV1, subjects
from kotae.tracing import current_trace_id
from kotae.services.ingest.sources import RawComment
from kotae.clarify import ClarifyStore
from kotae.services.ingest.triage import METHOD, Dropped, Triage, hash_author


@dataclass(frozen=True)
class Ingested:
    comment_id: str
    status: str  # admitted | dropped | resend
    duplicate: bool = False  # the bus had already stored it (a resend across restarts)
    trace_id: str | None = None
    origin: str | None = None  # message id of the published comment


class Ingestor:
    """Triage comments and publish them."""

    def __init__(
        self, broker: NatsBroker, triage: Triage, tracer: Tracer, *, session: str = "live", clarify_ttl_s: float = 180.0
    ) -> None:
        self.broker = broker
        self.clarify_ttl_s = clarify_ttl_s
        self._clarify: ClarifyStore | None = None
        self.triage = triage
        self.tracer = tracer
        # Live sources keep session "live", so a platform resend (same id) is
        # stored once even across restarts; each replay run is its own session.
        self.session = session

    async def _publish(self, subject: str, message: CommentV1 | AnswerV1) -> bool:
        origin = f"{message.stream_id}:{self.session}"
        ack = await self.broker.publish(
            message.model_dump_json().encode(),
            subject,
            stream=subjects.stream_of(subject),
            headers={"Nats-Msg-Id": msg_id(message.comment_id, origin, "ingest", subject), "content-type": "application/json"},
            correlation_id=message.comment_id,
            timeout=10.0,
        )
        return bool(ack is not None and ack.duplicate)

    async def _awaiting_reply(self, raw: RawComment) -> bool:
        if not raw.author:
            return False
        if self._clarify is None:
            js = self.broker.config.connection_state.stream
            self._clarify = await ClarifyStore.open(js, self.clarify_ttl_s)
        return await self._clarify.waiting(self.triage.stream_id, hash_author(raw.author))

    async def ingest(self, raw: RawComment) -> Ingested:
        if raw.id in self.triage.seen:
            return Ingested(raw.id, "resend")
        admitted = self.triage.admit(raw, awaiting_reply=await self._awaiting_reply(raw))
        if admitted is None:
            return Ingested(raw.id, "resend")
        with self.tracer.start_as_current_span("ingest", attributes={"kotae.comment_id": raw.id}) as span:
            trace_id = current_trace_id()
            if isinstance(admitted, Dropped):
                span.set_attribute("kotae.triage", "dropped")
                c = admitted.comment
                answer = AnswerV1(
                    comment_id=c.comment_id,
                    stream_id=c.stream_id,
                    comment=c,
                    outcome="dropped",
                    reason=admitted.reason,
                    methods={"ingest": METHOD},
                    trace_id=trace_id,
                )
                duplicate = await self._publish(subjects.answer("dropped"), answer)
                return Ingested(raw.id, "dropped", duplicate, trace_id, c.message_id)
            span.set_attribute("kotae.triage", "admitted")
            duplicate = await self._publish(subjects.COMMENT, admitted)
            return Ingested(raw.id, "admitted", duplicate, trace_id, admitted.message_id)
