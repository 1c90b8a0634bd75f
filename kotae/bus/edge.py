"""The bus edge every stage shares: decode, handle, publish, and what to tell JetStream.

A stage's handler stays a short typed function: its input contract in, the
message(s) it produces out (:class:`kotae.stage.Handler`). This module owns the
promises around it:

* each output is published by its contract type to the subject the stage
  declared (an answer to ``kotae.answer.v1.<outcome>``), and the input is acked
  only after every output is stored (JetStream publish ack);
* each output carries ``Nats-Msg-Id = <comment_id>:<origin>:<stage>:<subject>``,
  so a redelivered input never duplicates anything downstream;
* a publish that meets a bus outage (a stream electing its leader, a reconnect)
  is tried again for up to a minute (:mod:`kotae.bus.outage`) rather than
  spending the input's deliveries;
* a transient fault (:class:`kotae.faults.TransientError`, or anything
  unexpected) is redelivered with a growing delay, a bounded number of times;
  then the comment gets its terminal outcome and the input is dead-lettered as
  ``exhausted``;
* poison input (not JSON, wrong schema, too large) goes straight to the stage's
  dead-letter subject with the error and the original payload, and the stage
  carries on with the next message.

:meth:`StageEdge.process` decides; whoever fetched the message carries the
decision out: :class:`kotae.bus.pull.PullLoop` against JetStream, or the
in-memory subscriber of :meth:`StageEdge.router` under FastStream's
``TestNatsBroker``.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import structlog
from faststream import AckPolicy
from faststream.message import StreamMessage
from faststream.nats import JStream, NatsRouter, PullSub
from faststream.nats.annotations import NatsMessage
from nats.aio.msg import Msg
from opentelemetry import context as otel_context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import BaseModel, ValidationError

from kotae import metrics
from kotae.bus.outage import OUTAGE_DEADLINE_S, through_outage
from kotae.bus.topology import consumer_config
from kotae.contracts import (
    AnswerV1,
    CommentV1,
    DeadLetterV1,
    DraftV1,
    EvaluationV1,
    PipelineMessage,
    RerankV1,
    RetrievalV1,
    subjects,
)
from kotae.faults import PoisonError
from kotae.settings import Settings
from kotae.stage import Handler, Output, Stage
from kotae.tracing import current_trace_id

log = structlog.get_logger("kotae.bus")

POISON_ERRORS: tuple[type[BaseException], ...] = (
    PoisonError,
    ValidationError,
    json.JSONDecodeError,
    UnicodeDecodeError,
)

#: (delivery number of the message being handled, deliveries allowed) — see final_attempt().
_attempt: ContextVar[tuple[int, int]] = ContextVar("kotae_attempt", default=(1, 1))

_PROPAGATOR = TraceContextTextMapPropagator()


def final_attempt() -> bool:
    """True while a stage handles the last delivery a message gets before it is given up.

    A model stage that would otherwise retry (a reply that stays unusable) degrades
    instead on its last chance, so the comment still gets an answer.
    """
    delivered, allowed = _attempt.get()
    return delivered >= allowed


def msg_id(comment_id: str, origin: str, stage: str, subject: str) -> str:
    """The Nats-Msg-Id of a stage's output: same input, same id, one stored copy.

    ``origin`` is the id of the comment message that ingest published, which
    every later message carries; a redelivered input has the same origin, while
    the same comment replayed later is a new ingestion with a new origin.
    """
    return f"{comment_id}:{origin}:{stage}:{subject}"


def origin_of(message: BaseModel) -> str:
    """The ingest message id a message descends from (see :func:`msg_id`)."""
    if isinstance(message, PipelineMessage):
        return message.comment.message_id
    if isinstance(message, EvaluationV1):
        return message.answer_message_id
    if isinstance(message, CommentV1):
        return message.message_id
    raise TypeError(f"{type(message).__name__} carries no origin id")


@dataclass(frozen=True)
class Disposition:
    """What to tell JetStream about a message once the edge is done with it: ack, or nak with a delay."""

    ack: bool
    delay: float = 0.0
    result: str = "ok"  # for kotae_messages_total: ok, poison, exhausted, retry


ACK = Disposition(ack=True)


def _payload_text(body: bytes) -> tuple[str, str]:
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def _ids_from(body: bytes) -> tuple[str | None, str | None]:
    try:
        # Decode strictly first: json.loads(bytes) would turn invalid UTF-8 into lone
        # surrogates, and a dead letter carrying them could not be stored.
        data = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    comment_id, stream_id = data.get("comment_id"), data.get("stream_id")
    return (
        comment_id if isinstance(comment_id, str) else None,
        stream_id if isinstance(stream_id, str) else None,
    )


def deliveries_of(msg: Msg) -> int:
    """How many times JetStream has delivered ``msg`` (1 for a message that is not a JetStream delivery)."""
    try:
        return int(msg.metadata.num_delivered)
    except Exception:
        return 1


def _stream_sequence(msg: Msg) -> int | None:
    try:
        return int(msg.metadata.sequence.stream)
    except Exception:  # not a JetStream message (core NATS, in-memory tests)
        return None


def _docs_of(message: BaseModel) -> list[Any]:
    return list(message.docs) if isinstance(message, RetrievalV1 | RerankV1 | DraftV1) else []


def failed_answer(stage: str, message: BaseModel, reason: str) -> AnswerV1:
    """The ``failed`` outcome of a comment whose ``stage`` gave up on ``message``."""
    if not isinstance(message, CommentV1 | PipelineMessage):
        raise TypeError(f"{type(message).__name__} is not about a comment")
    return message.forward(
        AnswerV1, stage=stage, outcome="failed", reason=f"{stage}_failed: {reason}", docs=_docs_of(message)
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:10]:
            loc = ".".join(str(p) for p in err["loc"]) or "(message)"
            parts.append(f"{loc}: {err['msg']}")
        return f"schema violation ({exc.title}): " + "; ".join(parts)
    return f"{type(exc).__name__}: {exc}"


class StageEdge:
    """One stage's wiring to the bus: its declared publishers and the rules around its handler.

    Example::

        edge = StageEdge(STAGE, settings, handler)
        broker.include_router(edge.router())      # publishers (+ an in-memory subscriber, for tests)
        disposition = await edge.process(msg)      # decode, handle, publish; then ack or nak
    """

    def __init__(
        self,
        stage: Stage,
        settings: Settings,
        handler: Handler[Any] | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        if stage.consumes is None:
            raise TypeError(f"stage {stage.name} consumes nothing")
        self.stage = stage
        self.name = stage.name
        self.settings = settings
        self.handler = handler
        self.contract = stage.consumes.contract
        self.publish_deadline_s = OUTAGE_DEADLINE_S  # see kotae.bus.outage
        # The process's own provider: a span of a process that exports nothing is never recorded.
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("kotae.bus")
        self.dead_letter_subject = subjects.deadletter(stage.name)
        self._publishers: dict[str, Any] = {}
        self._subject_of: dict[type[BaseModel], str] = {}
        for output in stage.outputs:
            if output.contract is not AnswerV1:
                if output.contract in self._subject_of:
                    raise TypeError(f"stage {stage.name} declares {output.contract.__name__} on two subjects")
                self._subject_of[output.contract] = output.subject
        self._router: NatsRouter | None = None

    # --- wiring -----------------------------------------------------------------

    def router(self, *, in_memory_subscriber: bool = True) -> NatsRouter:
        """A router with the stage's declared publishers and, unless told not to, its subscriber.

        The subscriber is what AsyncAPI documents and what FastStream's
        ``TestNatsBroker`` delivers to in memory. A process on a real server does
        not run it: :class:`kotae.bus.pull.PullLoop` pulls instead (bounded in
        flight, kept in progress, handed back on stop).
        """
        router = NatsRouter()
        dead_letters = Output(
            self.dead_letter_subject, DeadLetterV1, "Input this stage could not process, with the error."
        )
        for output in (*self.stage.outputs, dead_letters):
            self._publishers[output.subject] = router.publisher(
                output.subject,
                stream=JStream(output.stream, declare=False),
                schema=output.contract,
                title=f"{self.name}:{output.subject}",
                description=output.description,
            )
        if in_memory_subscriber:
            self._subscribe(router)
        self._router = router
        return router

    def _subscribe(self, router: NatsRouter) -> None:
        consumes = self.stage.consumes
        assert consumes is not None
        contract = consumes.contract

        async def document_only(_: StreamMessage[Any]) -> BaseModel:
            # The edge decodes the body itself (and dead-letters what does not decode), so
            # FastStream's decoding is skipped: the typed argument only tells AsyncAPI the contract.
            return contract.model_construct()

        async def deliver(message: BaseModel, msg: NatsMessage) -> None:
            await self.process(msg.raw_message)

        deliver.__annotations__ = {"message": contract, "msg": NatsMessage, "return": None}
        router.subscriber(
            consumes.subject,
            stream=JStream(consumes.stream, declare=False),
            durable=self.stage.durable,
            config=consumer_config(self.stage, self.settings),
            pull_sub=PullSub(batch_size=min(self.settings.inflight, 64), timeout=1.0),
            decoder=document_only,
            ack_policy=AckPolicy.MANUAL,  # in memory there is no JetStream to acknowledge
            title=f"{self.name}:{consumes.subject}",
            description=self.stage.description,
        )(deliver)

    # --- one message ------------------------------------------------------------

    @property
    def payload_limit(self) -> int:
        """Largest input accepted: KOTAE_MAX_PAYLOAD_BYTES for comments; 4x that between stages.

        Messages between stages carry their evidence texts, so they are legitimately
        larger than the comment they began as (the streams accept up to 4x).
        """
        assert self.stage.consumes is not None
        if self.stage.consumes.subject == subjects.COMMENT:
            return self.settings.max_payload_bytes
        return self.settings.max_payload_bytes * 4

    def _limit_rule(self) -> str:
        assert self.stage.consumes is not None
        if self.stage.consumes.subject == subjects.COMMENT:
            return "KOTAE_MAX_PAYLOAD_BYTES"
        return "4 x KOTAE_MAX_PAYLOAD_BYTES between stages"

    async def process(self, msg: Msg) -> Disposition:
        """Decode ``msg``, run the handler, publish what it returns; say whether to ack or nak."""
        headers = msg.headers or {}
        comment_id = headers.get("correlation_id")  # set to the comment id by every publisher
        structlog.contextvars.bind_contextvars(stage=self.name, comment_id=comment_id)
        ctx = _PROPAGATOR.extract(headers)
        if not trace.get_current_span(ctx).get_span_context().is_valid:
            root = self.tracer.start_span("consume")  # a message from outside kotae starts a trace
            root.end()
            ctx = trace.set_span_in_context(root, ctx)
        token = otel_context.attach(ctx)
        deliveries = deliveries_of(msg)
        attempt = _attempt.set((deliveries, self.settings.max_deliver))
        started = time.perf_counter()
        disposition = Disposition(ack=False, result="retry")
        try:
            with self.tracer.start_as_current_span(f"{msg.subject} process", kind=SpanKind.CONSUMER) as span:
                # The attributes of FastStream's own publish spans, so both read alike in Grafana.
                span.set_attribute("messaging.system", "nats")
                span.set_attribute("messaging.operation", "process")
                span.set_attribute("messaging.destination_publish.name", msg.subject)
                if comment_id:
                    span.set_attribute("messaging.message.conversation_id", comment_id)
                span.set_attribute("kotae.stage", self.name)
                if comment_id:
                    span.set_attribute("kotae.comment_id", comment_id)
                disposition = await self._process(msg, deliveries, span)
            return disposition
        finally:
            metrics.MESSAGES.labels(self.name, disposition.result).inc()
            metrics.HANDLE_SECONDS.labels(self.name).observe(time.perf_counter() - started)
            _attempt.reset(attempt)
            otel_context.detach(token)
            structlog.contextvars.unbind_contextvars("stage", "comment_id")

    async def _process(self, msg: Msg, deliveries: int, span: Any) -> Disposition:
        body = bytes(msg.data or b"")
        message: BaseModel | None = None
        try:
            if len(body) > self.payload_limit:
                raise PoisonError(
                    f"payload of {len(body)} bytes exceeds {self.payload_limit} bytes ({self._limit_rule()})"
                )
            message = self.contract.model_validate_json(body)
            await self.publish_all(await self._handler().handle(message), message)
            log.debug("message.handled", deliveries=deliveries)
            return ACK
        except POISON_ERRORS as exc:
            span.record_exception(exc)
            return await self._poison(msg, exc)
        except Exception as exc:  # transient faults and anything unforeseen: bounded retry
            span.record_exception(exc)
            if deliveries < self.settings.max_deliver:
                delay = self.retry_delay(deliveries)
                log.warning("message.retry", error=_describe(exc)[:300], deliveries=deliveries, delay_s=delay)
                return Disposition(ack=False, delay=delay, result="retry")
            assert message is not None  # a message that does not decode is poison, not a fault
            return await self._give_up(
                msg, message, f"gave up after {self.settings.max_deliver} deliveries: {_describe(exc)}"
            )

    async def _poison(self, msg: Msg, exc: BaseException) -> Disposition:
        try:
            await self.dead_letter(msg, error_type="poison", error=_describe(exc))
        except Exception as publish_exc:  # the dead letter is not stored yet: keep the input
            log.warning("message.dead_letter_retry", error=_describe(publish_exc)[:300])
            return Disposition(ack=False, delay=self.retry_delay(1), result="retry")
        return Disposition(ack=True, result="poison")

    async def _give_up(self, msg: Msg, message: BaseModel, reason: str) -> Disposition:
        try:
            give_up = self._handler().give_up
            if give_up is not None:
                outcome = await give_up(message, reason)
            else:
                outcome = failed_answer(self.name, message, reason)
            await self.publish_all(outcome, message)
            await self.dead_letter(msg, error_type="exhausted", error=reason)
        except Exception as publish_exc:
            # Storing the outcome failed too (the bus is electing a leader, say): try the
            # give-up again on a later delivery. Message ids make the retry idempotent.
            log.warning("message.give_up_retry", error=_describe(publish_exc)[:300], deliveries=deliveries_of(msg))
            return Disposition(ack=False, delay=self.retry_delay(self.settings.max_deliver), result="retry")
        return Disposition(ack=True, result="exhausted")

    def _handler(self) -> Handler[Any]:
        if self.handler is None:
            raise RuntimeError(f"{self.name}'s edge was built for documentation only: it has no handler")
        return self.handler

    def retry_delay(self, deliveries: int) -> float:
        return self.settings.retry_backoff_s * 2 ** max(0, deliveries - 1)

    # --- publishing -------------------------------------------------------------

    def subject_for(self, message: BaseModel) -> str:
        """The declared subject of ``message``: its outcome's for an answer, its contract's otherwise."""
        if isinstance(message, AnswerV1):
            subject = subjects.answer(message.outcome)
        else:
            subject = self._subject_of.get(type(message), "")
        if subject not in self._publishers:
            raise RuntimeError(
                f"{self.name} publishes {type(message).__name__} to {subject or '(no subject)'!r} without declaring it"
            )
        return subject

    async def publish_all(self, produced: BaseModel | Sequence[BaseModel] | None, source: BaseModel) -> None:
        """Publish what a handler returned, in order, each once its predecessor is stored."""
        if produced is None:
            return
        for message in [produced] if isinstance(produced, BaseModel) else produced:
            await self.publish(message, source)

    async def publish(self, message: BaseModel, source: BaseModel | None = None) -> None:
        """Publish ``message`` to its declared subject and wait until the stream stored it."""
        if self._router is None:
            raise RuntimeError("call router() before publishing")
        subject = self.subject_for(message)
        if isinstance(message, AnswerV1) and message.trace_id is None:
            message = message.model_copy(update={"trace_id": current_trace_id()})
        comment_id = message.comment_id if isinstance(message, CommentV1 | PipelineMessage | EvaluationV1) else "-"
        # Every answer outcome of a stage shares one id, so two handlings of the same input
        # (a redelivery racing a slow first attempt) can never store two different outcomes.
        id_subject = subjects.ANSWER_PREFIX if subject.startswith(subjects.ANSWER_PREFIX + ".") else subject
        payload = message.model_dump_json().encode()
        headers = {
            "Nats-Msg-Id": msg_id(comment_id, origin_of(message), self.name, id_subject),
            "content-type": "application/json",
        }
        await through_outage(
            lambda: self._publishers[subject].publish(
                payload,
                stream=subjects.stream_of(subject),
                headers=headers,
                correlation_id=comment_id,
                timeout=10.0,
            ),
            deadline_s=self.publish_deadline_s,
            comment_id=comment_id,
            subject=subject,
        )
        metrics.observe_published(self.name, message, source, self.settings.model_prices)
        if self.handler is not None and self.handler.stored is not None:
            await self.handler.stored(message)
        log.debug("message.published", stage=self.name, subject=subject, comment_id=comment_id)

    async def dead_letter(self, msg: Msg, *, error_type: str, error: str) -> None:
        body = bytes(msg.data or b"")
        comment_id, stream_id = _ids_from(body)
        payload, encoding = _payload_text(body[: self.settings.max_payload_bytes])
        assert self.stage.consumes is not None
        letter = DeadLetterV1(
            stage=self.name,
            subject=msg.subject or self.stage.consumes.subject,
            error_type=error_type,
            error=error[:4000],
            comment_id=comment_id,
            stream_id=stream_id,
            deliveries=deliveries_of(msg),
            payload=payload,
            payload_encoding=encoding,
            headers={k: v for k, v in (msg.headers or {}).items() if isinstance(v, str)},
        )
        # The input's stream sequence is stable across redeliveries: one letter per stored input.
        seq = _stream_sequence(msg) or (msg.headers or {}).get("Nats-Msg-Id") or letter.message_id
        key = f"{self.name}:deadletter:{self.stage.consumes.stream}:{seq}"
        await self._publishers[self.dead_letter_subject].publish(
            letter.model_dump_json().encode(),
            stream=subjects.STREAM_DEADLETTER,
            headers={"Nats-Msg-Id": key, "content-type": "application/json"},
            correlation_id=comment_id or "-",
            timeout=10.0,
        )
        metrics.DEAD_LETTERS.labels(self.name, error_type).inc()
        log.warning(
            "message.dead_lettered",
            stage=self.name,
            error_type=error_type,
            error=error[:300],
            comment_id=comment_id,
            deliveries=letter.deliveries,
        )
