"""Ingest's bus edge: publish admitted comments, and the dropped ones' outcomes.

Each comment is published inside an ``ingest`` span, which becomes the root of
the comment's trace; the broker's trace middleware carries it onward in
``traceparent`` (see :mod:`kotae.tracing`). The platform's message id is the ``Nats-Msg-Id``, so a resend
within JetStream's duplicate window is stored once.

A moderation event (a deleted comment, a banned viewer) is published as
``moderation.v1`` with the platform's id of the event as its ``Nats-Msg-Id``; the
banned viewer is named as their comments name them (the same salted hash).
A comment carries what the platform says of its author beyond the id: whether
they are a member, and their display name when the id stands in for it.

With an answer cache (:mod:`kotae.services.ingest.answer_cache`), an admitted
question already verified in this scope is answered from it: ingest publishes the
cached answer as this comment's ``answer.v1.verified`` instead of the comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from faststream.nats import NatsBroker
from opentelemetry.trace import Tracer

from kotae.bus.edge import msg_id
from kotae.bus.outage import through_outage
from kotae.clarify import ClarifyStore
from kotae.contracts import AnswerV1, CommentV1, ModerationV1, subjects
from kotae.logs import get_logger
from kotae.services.ingest.answer_cache import AnswerCache
from kotae.services.ingest.sources import ChatItem, RawComment, RawModeration
from kotae.services.ingest.triage import Dropped, Triage, hash_author, hash_user_id, order_for_publishing
from kotae.tracing import current_trace_id

log = get_logger("kotae.ingest")


@dataclass(frozen=True)
class Ingested:
    comment_id: str
    status: str  # admitted | cached | dropped | resend
    duplicate: bool = False  # the bus had already stored it (a resend across restarts)
    trace_id: str | None = None
    origin: str | None = None  # message id of the published comment
    reason: str | None = None  # why it was dropped
    priority: int | None = None  # of an admitted comment


class Ingestor:
    """Triage comments and publish them."""

    def __init__(
        self,
        broker: NatsBroker,
        triage: Triage,
        tracer: Tracer,
        *,
        session: str = "live",
        clarify_ttl_s: float = 180.0,
        cache: AnswerCache | None = None,
    ) -> None:
        self.broker = broker
        self.cache = cache
        self.clarify_ttl_s = clarify_ttl_s
        self._clarify: ClarifyStore | None = None
        self.triage = triage
        self.tracer = tracer
        # Live sources keep session "live", so a platform resend (same id) is
        # stored once even across restarts; each replay run is its own session.
        self.session = session
        self.publish_deadline_s = 60.0

    async def _publish(self, subject: str, message: CommentV1 | AnswerV1 | ModerationV1) -> bool:
        """Publish and wait for the stream's ack; True when the bus already had it.

        A stream without a leader for a moment (a node lost, an election) or a
        reconnecting client is retried with a growing pause for up to
        ``publish_deadline_s``: the ``Nats-Msg-Id`` makes a repeat harmless, and a
        live chat cannot be asked to send the comment again.
        """
        origin = f"{message.stream_id}:{self.session}"
        payload = message.model_dump_json().encode()
        if isinstance(message, ModerationV1):
            about = message.platform_id or message.message_id  # a platform's resend is stored once
        else:
            about = message.comment_id
        headers = {
            "Nats-Msg-Id": msg_id(about, origin, "ingest", subject),
            "content-type": "application/json",
        }
        ack = await through_outage(
            lambda: self.broker.publish(
                payload,
                subject,
                stream=subjects.stream_of(subject),
                headers=headers,
                correlation_id=message.comment_id or about,
                timeout=10.0,
            ),
            deadline_s=self.publish_deadline_s,
            comment_id=about,
        )
        return bool(ack is not None and ack.duplicate)

    async def _awaiting_reply(self, raw: RawComment) -> bool:
        if not raw.author:
            return False
        if self._clarify is None:
            js = self.broker.connection.jetstream()
            self._clarify = await ClarifyStore.open(js, self.clarify_ttl_s)
        return await self._clarify.waiting(self.triage.stream_id, self.triage.author_of(raw))

    async def ingest(self, raw: RawComment) -> Ingested:
        """Triage and publish one comment."""
        return (await self.ingest_many([raw]))[0]

    async def ingest_many(self, items: list[ChatItem]) -> list[Ingested]:
        """Triage a batch (one model call per ``batch_size`` when a model classifies) and
        publish it, Super Chats and fresh questions first, moderation events after; results in input order."""
        raws = [item for item in items if isinstance(item, RawComment)]
        done = {id(raw): result for raw, result in zip(raws, await self._ingest_comments(raws), strict=True)}
        for item in items:
            if isinstance(item, RawModeration):
                done[id(item)] = await self.moderate(item)
        return [done[id(item)] for item in items]

    def author_of(self, item: RawModeration) -> str:
        """The viewer a moderation event names, as their comments name them on the bus."""
        if item.author_id:
            return hash_user_id(item.author_id, self.triage.salt)
        return hash_author(item.author, self.triage.salt)

    async def moderate(self, item: RawModeration) -> Ingested:
        """Publish one moderation event: nothing of that comment, or of that viewer, airs."""
        event = ModerationV1(
            stream_id=self.triage.stream_id,
            action=item.action,
            comment_id=item.comment_id,
            author=self.author_of(item) if item.action == "user_banned" else None,
            ban_type=item.ban_type,
            ban_duration_s=item.ban_duration_s,
            source=self.triage.source,
            platform_id=item.id,
            at=item.published_at,
        )
        duplicate = await self._publish(subjects.moderation(item.action), event)
        target = item.comment_id or event.author or item.id
        log.info("ingest.moderation", action=item.action, target=target, duplicate=duplicate)
        return Ingested(target, "moderation", duplicate, origin=event.message_id, reason=item.action)

    async def _ingest_comments(self, raws: list[RawComment]) -> list[Ingested]:
        if not raws:
            return []
        fresh = [raw for raw in raws if raw.id not in self.triage.seen]
        awaiting = {raw.id for raw in fresh if await self._awaiting_reply(raw)}
        decisions = await self.triage.admit_batch(raws, awaiting=awaiting)
        results: list[Ingested] = [Ingested(raw.id, "resend") for raw in raws]
        ready = [(i, d) for i, d in enumerate(decisions) if d is not None]
        for i, decision in order_for_publishing(ready):
            results[i] = await self._publish_decision(raws[i], decision)
        return results

    async def _publish_decision(self, raw: RawComment, admitted: CommentV1 | Dropped) -> Ingested:
        with self.tracer.start_as_current_span("ingest", attributes={"kotae.comment_id": raw.id}) as span:
            trace_id = current_trace_id()
            if isinstance(admitted, Dropped):
                span.set_attribute("kotae.triage", "dropped")
                c = _with_author_details(admitted.comment, raw)
                answer = AnswerV1(
                    comment_id=c.comment_id,
                    stream_id=c.stream_id,
                    comment=c,
                    outcome="dropped",
                    reason=admitted.reason,
                    methods={"ingest": admitted.method},
                    merged_into=admitted.merged_into,
                    degraded=admitted.degraded_reason is not None,
                    degraded_reason=admitted.degraded_reason,
                    trace_id=trace_id,
                )
                duplicate = await self._publish(subjects.answer("dropped"), answer)
                return Ingested(raw.id, "dropped", duplicate, trace_id, c.message_id, admitted.reason)
            admitted = _with_author_details(admitted, raw)
            cached = await self.cache.answer_for(admitted, trace_id) if self.cache is not None else None
            if cached is not None and cached.cached_from is not None:
                span.set_attribute("kotae.triage", "cached")
                duplicate = await self._publish(subjects.answer("verified"), cached)
                reason = f"cached_from: {cached.cached_from.comment_id}"
                return Ingested(raw.id, "cached", duplicate, trace_id, admitted.message_id, reason, admitted.priority)
            span.set_attribute("kotae.triage", "admitted")
            if self.cache is not None:
                self.cache.expect(admitted)
            duplicate = await self._publish(subjects.COMMENT, admitted)
            return Ingested(raw.id, "admitted", duplicate, trace_id, admitted.message_id, priority=admitted.priority)

    async def close(self) -> None:
        """Release what ingest holds on the bus (the answer cache keeps the answers verified so far first)."""
        if self.cache is not None:
            await self.cache.close()


def _with_author_details(comment: CommentV1, raw: RawComment) -> CommentV1:
    """What the platform says of the author beyond the id triage made: membership, and the display
    name when a hashed id stands in for it (the overlay shows names, the bus keys on ids)."""
    name = raw.author if raw.author and raw.author != comment.author else None
    if not raw.member and name is None:
        return comment
    return comment.model_copy(update={"member": raw.member, "author_name": name})
