"""The bus edge every stage shares: subscribe, publish, ack, retry, dead-letter.

A stage's handler stays a short typed function (pydantic model in, publishes
out). This module owns the promises around it:

* the input is acked only after every output is stored (JetStream publish ack);
* each output carries ``Nats-Msg-Id = <comment_id>:<stage>:<subject>``, so a
  redelivered input never duplicates anything downstream;
* a transient fault (:class:`TransientError`, or anything unexpected) is
  redelivered with a growing delay, a bounded number of times, then
  dead-lettered as ``exhausted``;
* poison input (not JSON, wrong schema, too large) goes straight to the
  stage's dead-letter subject with the error and the original payload, and the
  stage carries on with the next message;
* a fetched message starts its handler at once, at most KOTAE_INFLIGHT at a
  time (bench/pipeline.py measures the hop against raw JetStream);
* on shutdown, messages this process fetched but did not finish are handed
  back (nak) at once, so another replica takes them without waiting out the
  acknowledgement wait.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import structlog
from fast_depends.exceptions import ValidationError as DependsValidationError
from faststream import AckPolicy, BaseMiddleware
from faststream.exceptions import NackMessage
from faststream.message import StreamMessage
from faststream.nats import JStream, NatsRouter, PullSub
from nats.errors import ConnectionClosedError
from nats.js.errors import ServiceUnavailableError
from opentelemetry import trace
from pydantic import BaseModel, ValidationError

from kotae import metrics
from kotae.bus.access import inbox_prefix
from kotae.bus.topology import CONSUMERS, ConsumerSpec
from kotae.contracts import AnswerV1, CommentV1, DeadLetterV1, subjects
from kotae.settings import Settings
from kotae.tracing import current_trace_id

log = structlog.get_logger("kotae.bus")

# How long one pull request waits for messages; a stopping stage waits this long at most for it.
FETCH_TIMEOUT_S = 1.0


class TransientError(Exception):
    """A fault worth retrying later: a model timeout, a 429, a backend restarting."""


class PoisonError(ValueError):
    """Input that no retry can fix; it is dead-lettered at once."""


POISON_ERRORS: tuple[type[BaseException], ...] = (
    PoisonError,
    ValidationError,
    DependsValidationError,
    json.JSONDecodeError,
    UnicodeDecodeError,
)


#: (delivery number of the message being handled, deliveries allowed) — see StageEdge.final_attempt.
_attempt: ContextVar[tuple[int, int]] = ContextVar("kotae_attempt", default=(1, 1))

ExhaustedHandler = Callable[[BaseModel, str], Awaitable[None]]


def msg_id(comment_id: str, origin: str, stage: str, subject: str) -> str:
    """The Nats-Msg-Id of a stage's output: same input, same id, one stored copy.

    ``origin`` is the id of the comment message that ingest published, which
    every later message carries; a redelivered input has the same origin, while
    the same comment replayed later is a new ingestion with a new origin.
    """
    return f"{comment_id}:{origin}:{stage}:{subject}"


def origin_of(message: BaseModel) -> str:
    """The ingest message id a message descends from (see :func:`msg_id`)."""
    comment = getattr(message, "comment", None)
    if comment is not None:
        return comment.message_id
    for field in ("answer_message_id", "message_id"):
        value = getattr(message, field, None)
        if isinstance(value, str):
            return value
    raise TypeError(f"{type(message).__name__} carries no origin id")


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


def _deliveries(message: StreamMessage[Any]) -> int:
    raw = message.raw_message
    try:
        return int(raw.metadata.num_delivered)
    except Exception:
        return 1


def _still_pending(msg: Any) -> int:
    """Messages the consumer still held for delivery when JetStream sent ``msg`` (0 if unknown)."""
    try:
        return int(msg.metadata.num_pending or 0)
    except Exception:  # not a JetStream delivery
        return 0


def _stream_sequence(message: StreamMessage[Any]) -> int | None:
    try:
        return int(message.raw_message.metadata.sequence.stream)
    except Exception:  # not a JetStream message (core NATS, in-memory tests)
        return None


class StageEdge:
    """Wiring of one stage to the bus.

    Example::

        edge = StageEdge("reranker", settings)
        router = edge.router()

        edge.output(subjects.RERANK, RerankV1)

        @router.subscriber(**edge.subscription())
        async def on_retrieval(retrieval: RetrievalV1) -> None:
            await edge.publish(subjects.RERANK, rerank(retrieval))
    """

    def __init__(self, stage: str, settings: Settings, *, consumer: ConsumerSpec | None = None) -> None:
        self.stage = stage
        self.settings = settings
        self.consumer = consumer or CONSUMERS[stage]
        self.dead_letter_subject = subjects.deadletter(stage)
        self._router: NatsRouter | None = None
        self._publishers: dict[str, Any] = {}
        self._exhausted: tuple[type[BaseModel], ExhaustedHandler] | None = None
        # Raw messages fetched from JetStream and not yet finished, by id(): handed back on stop.
        self._unfinished: dict[int, Any] = {}
        # Messages being handled, by id(), with when JetStream last heard they are in progress.
        self._handling: dict[int, tuple[StreamMessage[Any], float]] = {}
        self._keepalive: asyncio.Task[None] | None = None

    # --- wiring -----------------------------------------------------------------

    def router(self) -> NatsRouter:
        """A router whose subscribers dead-letter poison input and retry faults."""
        self._router = _StageRouter(self, middlewares=[self._middleware_factory()])
        self.output(self.dead_letter_subject, DeadLetterV1, "Input this stage could not process, with the error.")
        return self._router

    def output(self, subject: str, model: type[BaseModel], description: str = "") -> None:
        """Declare that this stage publishes ``model`` on ``subject`` (documented in AsyncAPI)."""
        if self._router is None:
            raise RuntimeError("call router() before output()")
        self._publishers[subject] = self._router.publisher(
            subject,
            stream=JStream(subjects.stream_of(subject), declare=False),
            schema=model,
            title=f"{self.stage}:{subject}",
            description=description,
        )

    def on_exhausted(self, model: type[BaseModel], handler: ExhaustedHandler) -> None:
        """Give a comment whose retries ran out a terminal outcome, published by ``handler``.

        The input (parsed as ``model``) is still dead-lettered afterwards, so the
        original message is kept for a later replay.
        """
        self._exhausted = (model, handler)

    def fail_on_exhausted(self, model: type[BaseModel]) -> None:
        """On exhausted retries publish an explicit ``failed`` outcome with the reason."""
        self.output(subjects.answer("failed"), AnswerV1, "Retries used up (e.g. the model stayed unavailable): the reason.")

        async def publish_failed(message: BaseModel, reason: str) -> None:
            await self.publish(subjects.answer("failed"), failed_answer(self.stage, message, reason))

        self.on_exhausted(model, publish_failed)

    @property
    def payload_limit(self) -> int:
        """Largest input accepted: KOTAE_MAX_PAYLOAD_BYTES for comments; 4x that between stages.

        Messages between stages carry their evidence texts, so they are legitimately
        larger than the comment they began as (the streams accept up to 4x).
        """
        if self.consumer.subject == subjects.COMMENT:
            return self.settings.max_payload_bytes
        return self.settings.max_payload_bytes * 4

    @property
    def _limit_rule(self) -> str:
        if self.consumer.subject == subjects.COMMENT:
            return "KOTAE_MAX_PAYLOAD_BYTES"
        return "4 x KOTAE_MAX_PAYLOAD_BYTES between stages"

    def final_attempt(self) -> bool:
        """True while handling the last delivery a message gets before it is given up."""
        delivered, allowed = _attempt.get()
        return delivered >= allowed

    def subscription(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``router.subscriber``: the durable pull consumer."""
        inflight = self.settings.inflight
        options: dict[str, Any] = {
            "subject": self.consumer.subject,
            "stream": JStream(self.consumer.stream, declare=False),
            "durable": self.consumer.durable,
            "config": self.consumer.config(self.settings),
            "pull_sub": PullSub(batch_size=min(inflight, 64), timeout=FETCH_TIMEOUT_S),
            "ack_policy": AckPolicy.NACK_ON_ERROR,
            "title": f"{self.stage}:{self.consumer.subject}",
        }
        # No max_workers: the edge runs the pull loop and bounds handlers by KOTAE_INFLIGHT (run_pulls).
        model = self.consumer.model
        if model is not None:
            # Straight from the bytes to the contract (pydantic's JSON parser) rather than
            # json.loads and then validating the dict; the handler receives the model, and
            # invalid input raises ValidationError (poison). A coroutine: FastStream runs a
            # plain function given as decoder in a worker thread.
            async def decode(msg: StreamMessage[Any]) -> BaseModel:
                return model.model_validate_json(msg.body)

            options["decoder"] = decode
        prefix = inbox_prefix(self.settings)
        if prefix:
            # Pull replies arrive on this process's own inbox: a kotae NATS user may read no other.
            options["inbox_prefix"] = prefix.encode() + b"."
        options.update(overrides)
        return options

    # --- publishing -------------------------------------------------------------

    async def publish(self, subject: str, message: BaseModel) -> None:
        """Publish ``message`` to its stream and wait until the stream stored it."""
        publisher = self._publishers.get(subject)
        if publisher is None:
            raise RuntimeError(f"{self.stage} publishes to {subject!r} without declaring it with output()")
        comment_id = getattr(message, "comment_id", None) or "-"
        # Every answer outcome of a stage shares one id, so two handlings of the same input
        # (a redelivery racing a slow first attempt) can never store two different outcomes.
        id_subject = subjects.ANSWER_PREFIX if subject.startswith(subjects.ANSWER_PREFIX + ".") else subject
        await publisher.publish(
            message.model_dump_json().encode(),
            stream=subjects.stream_of(subject),
            headers={
                "Nats-Msg-Id": msg_id(comment_id, origin_of(message), self.stage, id_subject),
                "content-type": "application/json",
            },
            correlation_id=comment_id,
            timeout=10.0,
        )
        metrics.observe_published(self.stage, message, self.settings.model_prices)
        log.debug("message.published", stage=self.stage, subject=subject, comment_id=comment_id)

    async def dead_letter(
        self,
        message: StreamMessage[Any],
        *,
        error_type: str,
        error: str,
    ) -> None:
        body = message.body if isinstance(message.body, bytes) else bytes(message.body or b"")
        comment_id, stream_id = _ids_from(body)
        payload, encoding = _payload_text(body[: self.settings.max_payload_bytes])
        letter = DeadLetterV1(
            stage=self.stage,
            subject=getattr(message.raw_message, "subject", self.consumer.subject),
            error_type=error_type,
            error=error[:4000],
            comment_id=comment_id,
            stream_id=stream_id,
            deliveries=_deliveries(message),
            payload=payload,
            payload_encoding=encoding,
            headers={k: v for k, v in (message.headers or {}).items() if isinstance(v, str)},
        )
        # The input's stream sequence is stable across redeliveries: one letter per stored input.
        seq = _stream_sequence(message) or message.message_id
        key = f"{self.stage}:deadletter:{self.consumer.stream}:{seq}"
        await self._publishers[self.dead_letter_subject].publish(
            letter.model_dump_json().encode(),
            stream=subjects.STREAM_DEADLETTER,
            headers={"Nats-Msg-Id": key, "content-type": "application/json"},
            correlation_id=comment_id or message.correlation_id,
            timeout=10.0,
        )
        metrics.DEAD_LETTERS.labels(self.stage, error_type).inc()
        log.warning(
            "message.dead_lettered",
            stage=self.stage,
            error_type=error_type,
            error=error[:300],
            comment_id=comment_id,
            deliveries=letter.deliveries,
        )

    def retry_delay(self, deliveries: int) -> float:
        return self.settings.retry_backoff_s * 2 ** max(0, deliveries - 1)

    # --- shutdown ---------------------------------------------------------------

    def run_pulls(self, subscriber: Any) -> None:
        """Run ``subscriber``'s pull loop: each message started at once; on stop, nak what is unfinished.

        FastStream's concurrent pull subscriber hands every fetched message through a
        task group, a task, an in-memory queue and a second task before the handler
        starts. Here the loop starts one task per fetched message directly (through
        FastStream's own ``consume``: middlewares, decoding, acks), at most
        KOTAE_INFLIGHT at a time; what waits for a free worker holds the loop, so it
        fetches nothing more meanwhile. While the consumer has nothing else waiting,
        a fetch asks for one message: it returns as the message arrives, where a
        larger one first waits for the server's end-of-batch status.

        On stop, FastStream would cancel the fetch under way (whatever it had
        received is dropped) and cancel handlers still running after the graceful
        timeout, all without telling JetStream, so those messages would sit until
        KOTAE_ACK_WAIT_S ran out. Here the stop first lets the fetch under way end by
        itself (it is bounded by the pull timeout), records what it brought, gives
        running handlers the broker's graceful timeout, then hands back everything
        unfinished, including replies that reached the subscription after its last
        fetch. A replica (or this stage's next process) takes them at once; outputs
        carry message ids, so a half-done message redone elsewhere stores nothing twice.
        """
        if getattr(subscriber, "pull_sub", None) is None or not hasattr(subscriber, "_consume_pull"):
            return  # not a pull subscriber: nothing is fetched ahead
        stop = subscriber.stop
        unfinished = self._unfinished  # one dict for the edge's lifetime: emptied in place
        workers = asyncio.Semaphore(max(1, self.settings.inflight))
        running: set[asyncio.Task[Any]] = set()
        idle = asyncio.Event()
        idle.set()

        async def handle(msg: Any) -> None:
            try:
                await subscriber.consume(msg)
            finally:
                workers.release()

        async def pull_loop(**_: Any) -> None:
            pull = subscriber.subscription
            most, timeout = subscriber.pull_sub.batch_size, subscriber.pull_sub.timeout
            batch = most
            while subscriber.running:
                idle.clear()
                msgs: list[Any] = []
                try:
                    with contextlib.suppress(asyncio.TimeoutError, ConnectionClosedError, ServiceUnavailableError):
                        msgs = await pull.fetch(batch=batch, timeout=timeout)
                finally:
                    idle.set()
                if msgs:
                    batch = most if _still_pending(msgs[-1]) else 1
                for msg in msgs:
                    unfinished[id(msg)] = msg
                for msg in msgs:
                    await workers.acquire()
                    if not subscriber.running:  # stopping: the rest is handed back
                        workers.release()
                        break
                    task = asyncio.create_task(handle(msg))
                    running.add(task)
                    task.add_done_callback(running.discard)
                if msgs:
                    await asyncio.sleep(0)  # let the handlers start before the next pull request goes out

        async def stop_and_hand_back() -> None:
            pull = subscriber.subscription
            subscriber.running = False  # FastStream's own first step: no new fetch, no new message taken
            try:
                await asyncio.wait_for(idle.wait(), timeout=FETCH_TIMEOUT_S + 2.0)
            except asyncio.TimeoutError:
                log.warning("fetch.still_running", stage=self.stage)
            await stop()  # waits up to the graceful timeout for running handlers
            for task in list(running):
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            if pull is not None:
                self._take_leftovers(pull)
            await self.hand_back()

        subscriber._consume_pull = pull_loop
        subscriber.stop = stop_and_hand_back

    def _take_leftovers(self, pull: Any) -> None:
        """Count as unfinished the messages that reached ``pull`` after its last fetch returned."""
        queue = getattr(getattr(pull, "_sub", None), "_pending_queue", None)
        while queue is not None and not queue.empty():
            msg = queue.get_nowait()
            if msg.reply and not (msg.headers or {}).get("Status"):  # status replies carry nothing to hand back
                self._unfinished[id(msg)] = msg

    async def hand_back(self) -> None:
        """Nak every unfinished message (the connection is still open while subscribers stop)."""
        pending = list(self._unfinished.values())
        self._unfinished.clear()
        for msg in pending:
            try:
                await msg.nak()
            except Exception:  # already acked, or the connection is gone: redelivery decides
                continue
        if pending:
            log.info("messages.handed_back", stage=self.stage, count=len(pending))

    # --- middleware -------------------------------------------------------------

    def _middleware_factory(self) -> Callable[..., BaseMiddleware]:
        edge = self

        class StageMiddleware(BaseMiddleware):
            async def consume_scope(
                self, call_next: Callable[[StreamMessage[Any]], Awaitable[Any]], msg: StreamMessage[Any]
            ) -> Any:
                return await edge._consume(call_next, msg)

        return StageMiddleware

    async def _consume(
        self,
        call_next: Callable[[StreamMessage[Any]], Awaitable[Any]],
        msg: StreamMessage[Any],
    ) -> Any:
        comment_id = (msg.headers or {}).get("correlation_id")  # set to the comment id by every publisher
        structlog.contextvars.bind_contextvars(stage=self.stage, comment_id=comment_id)
        span = trace.get_current_span()
        if comment_id:
            span.set_attribute("kotae.comment_id", comment_id)
        span.set_attribute("kotae.stage", self.stage)
        token = _attempt.set((_deliveries(msg), self.settings.max_deliver))
        started = time.perf_counter()
        outcome = "ok"
        finished = True
        try:
            body = msg.body if isinstance(msg.body, bytes | bytearray) else b""
            limit = self.payload_limit
            if len(body) > limit:
                raise PoisonError(f"payload of {len(body)} bytes exceeds {limit} bytes ({self._limit_rule})")
            self._handling[id(msg)] = (msg, time.monotonic())
            self._ensure_keepalive()
            try:
                result = await call_next(msg)
            finally:
                self._handling.pop(id(msg), None)
            log.debug("message.handled", deliveries=_deliveries(msg))
            return result
        except NackMessage:
            outcome = "retry"
            raise
        except POISON_ERRORS as exc:
            outcome = "poison"
            span.record_exception(exc)
            await self.dead_letter(msg, error_type="poison", error=_describe(exc))
            return None
        except Exception as exc:  # transient faults and anything unforeseen: bounded retry
            span.record_exception(exc)
            deliveries = _deliveries(msg)
            if deliveries < self.settings.max_deliver:
                delay = self.retry_delay(deliveries)
                log.warning("message.retry", error=_describe(exc)[:300], deliveries=deliveries, delay_s=delay)
                outcome = "retry"
                raise NackMessage(delay=delay) from exc
            outcome = "exhausted"
            reason = f"gave up after {self.settings.max_deliver} deliveries: {_describe(exc)}"
            try:
                await self._terminal_outcome(msg, reason)
                await self.dead_letter(msg, error_type="exhausted", error=reason)
            except Exception as publish_exc:
                # Storing the outcome failed too (the bus is electing a leader, say): try the
                # give-up again on a later delivery. Message ids make the retry idempotent.
                outcome = "retry"
                log.warning("message.give_up_retry", error=_describe(publish_exc)[:300], deliveries=deliveries)
                raise NackMessage(delay=self.retry_delay(self.settings.max_deliver)) from publish_exc
            return None
        except asyncio.CancelledError:
            finished = False  # stopped mid-way: handed back on stop
            raise
        finally:
            if finished:
                self._unfinished.pop(id(msg.raw_message), None)
            metrics.MESSAGES.labels(self.stage, outcome).inc()
            metrics.HANDLE_SECONDS.labels(self.stage).observe(time.perf_counter() - started)
            _attempt.reset(token)
            structlog.contextvars.unbind_contextvars("stage", "comment_id")

    def _ensure_keepalive(self) -> None:
        if self._keepalive is None or self._keepalive.done():
            self._keepalive = asyncio.create_task(self._keep_in_progress())

    async def _keep_in_progress(self) -> None:
        """Tell JetStream which messages are still being worked on, so a slow model call is not redelivered.

        One task for the whole stage rather than one per message: at hundreds of
        messages a second, a timer per message costs more CPU than the acks it sends.
        """
        interval = max(0.5, self.settings.ack_wait_s / 3)
        while True:
            await asyncio.sleep(interval / 2)
            due = time.monotonic() - interval
            for msg, since in list(self._handling.values()):
                if since > due:
                    continue
                try:
                    await msg.raw_message.in_progress()
                except Exception:  # not a JetStream message, or the connection is gone: redelivery decides
                    continue
                key = id(msg)
                if key in self._handling:
                    self._handling[key] = (msg, time.monotonic())

    async def _terminal_outcome(self, msg: StreamMessage[Any], reason: str) -> None:
        if self._exhausted is None:
            return
        model, handler = self._exhausted
        try:
            message = model.model_validate_json(msg.body)
        except (ValidationError, ValueError):
            return
        await handler(message, reason)


class _StageRouter(NatsRouter):
    """A router that lets its edge hand back unfinished messages when a subscriber stops."""

    def __init__(self, edge: StageEdge, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._edge = edge

    def subscriber(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        subscriber = super().subscriber(*args, **kwargs)
        self._edge.run_pulls(subscriber)
        return subscriber


def failed_answer(stage: str, message: BaseModel, reason: str) -> AnswerV1:
    """The ``failed`` outcome of a comment whose ``stage`` gave up on ``message``."""
    comment = message if isinstance(message, CommentV1) else getattr(message, "comment")
    return AnswerV1(
        comment_id=getattr(message, "comment_id"),
        stream_id=getattr(message, "stream_id"),
        comment=comment,
        outcome="failed",
        reason=f"{stage}_failed: {reason}",
        docs=list(getattr(message, "docs", []) or []),
        methods=dict(getattr(message, "methods", {}) or {}),
        degraded=bool(getattr(message, "degraded", False)),
        degraded_reason=getattr(message, "degraded_reason", None),
        model_calls=list(getattr(message, "model_calls", []) or []),
        trace_id=current_trace_id(),
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:10]:
            loc = ".".join(str(p) for p in err["loc"]) or "(message)"
            parts.append(f"{loc}: {err['msg']}")
        return f"schema violation ({exc.title}): " + "; ".join(parts)
    return f"{type(exc).__name__}: {exc}"
