"""Every replica reads the four streams the state is made of, each through an ordered consumer of its own.

* ``kotae.answer.v1.>`` — verified answers (the queue) and merged duplicates (the askers);
* ``kotae.moderation.v1.>`` — deleted comments and banned viewers;
* ``kotae.control.v1.>`` — operator commands, the sender's NATS user in the subject;
* ``kotae.onair.v1.>`` — what the speaker did, including this process when it speaks.

Answers, moderation and on-air events are read from a start time (the rebuild
window, or earlier when the speaker's progress says some answer still waits);
commands from the one after the last that the stored session includes. Nothing
is acknowledged: these consumers take nothing from anyone (the ``reader`` rules
of :mod:`kotae.bus.permissions`). A message that does not parse is logged and
skipped: it belongs to another producer, not to this stage, to dead-letter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from kotae.contracts import AnswerV1, ControlV1, ModerationV1, OnAirEventV1, subjects
from kotae.services.onair.state import OnAirState

log = structlog.get_logger("kotae.onair")

_VERIFIED = subjects.answer("verified")
_DROPPED = subjects.answer("dropped")

#: The streams followed, and the subject filter of each.
FOLLOWED: dict[str, str] = {
    subjects.STREAM_ANSWERS: subjects.ANSWER_ALL,
    subjects.STREAM_MODERATION: subjects.MODERATION_ALL,
    subjects.STREAM_CONTROL: subjects.CONTROL_ALL,
    subjects.STREAM_ONAIR: subjects.ONAIR_ALL,
}


def _seq(msg: Msg) -> int:
    try:
        return int(msg.metadata.sequence.stream)
    except Exception:
        return 0


class Follower:
    """The ordered consumers feeding one :class:`OnAirState`, and how far each has read.

    Example::

        follower = Follower(state, on_event=feed.add)
        await follower.start(js, since=datetime.now(UTC) - timedelta(minutes=11), control_after=0)
        await follower.caught_up(js)      # True once everything the streams held is applied
    """

    def __init__(self, state: OnAirState, *, on_event: Callable[[int, OnAirEventV1], Any] | None = None) -> None:
        self.state = state
        self.on_event = on_event
        self.position: dict[str, int] = dict.fromkeys(FOLLOWED, 0)
        self._busy: dict[str, bool] = dict.fromkeys(FOLLOWED, False)
        self._subs: dict[str, Any] = {}

    async def start(self, js: JetStreamContext, *, since: datetime, control_after: int) -> None:
        handlers = {
            subjects.STREAM_ANSWERS: self._answer,
            subjects.STREAM_MODERATION: self._moderation,
            subjects.STREAM_CONTROL: self._control,
            subjects.STREAM_ONAIR: self._event,
        }
        for stream, subject in FOLLOWED.items():
            if stream == subjects.STREAM_CONTROL:
                config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=control_after + 1)
            else:
                config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)
            self._subs[stream] = await js.subscribe(
                subject, stream=stream, cb=self._guarded(stream, handlers[stream]), ordered_consumer=True, config=config
            )

    def _guarded(self, stream: str, handle: Callable[[Msg], None]) -> Callable[[Msg], Any]:
        async def callback(msg: Msg) -> None:
            self._busy[stream] = True
            try:
                handle(msg)
            except (ValidationError, ValueError) as exc:
                log.warning("onair.unreadable", stream=stream, subject=msg.subject, error=str(exc)[:300])
            except Exception:  # a bug must not stop the consumer: the next message still counts
                log.exception("onair.apply_failed", stream=stream, subject=msg.subject)
            finally:
                self.position[stream] = max(self.position[stream], _seq(msg))
                self._busy[stream] = False

        return callback

    def _answer(self, msg: Msg) -> None:
        # Read the bytes first: most answers are none of the queue's business (JSON escapes a viewer's quotes).
        unthanked = b'"superchat":null' in msg.data and b'"membership":{' not in msg.data
        if msg.subject == _DROPPED:
            if b'"merged_into":null' in msg.data and unthanked:
                return  # a dropped comment that credits nobody and is thanked for nothing: nothing for the queue
        elif msg.subject != _VERIFIED and unthanked:
            return  # only a Super Chat or a membership event is aired (as a thanks) without a verified answer
        answer = AnswerV1.model_validate_json(msg.data)
        self.state.on_answer(answer, _seq(msg), (msg.headers or {}).get("traceparent"))

    def _moderation(self, msg: Msg) -> None:
        self.state.on_moderation(ModerationV1.model_validate_json(msg.data))

    def _control(self, msg: Msg) -> None:
        command = ControlV1.model_validate_json(msg.data)
        name, sender = subjects.sender_of(msg.subject)
        if name != command.command:
            log.warning("onair.command_mismatch", subject=msg.subject, command=command.command)
            return
        if sender != command.issued_by:
            log.warning("onair.command_sender", subject_user=sender, issued_by=command.issued_by)
        self.state.on_control(command, sender, _seq(msg))

    def _event(self, msg: Msg) -> None:
        event = OnAirEventV1.model_validate_json(msg.data)
        self.state.on_event(event)
        if self.on_event is not None:
            self.on_event(_seq(msg), event)

    async def caught_up(self, timeout: float = 30.0) -> bool:
        """Wait until every message the streams held when asked has been applied.

        A consumer is caught up when the server has nothing left for it and nothing
        it delivered waits in this process or is being applied.
        """
        deadline = time.monotonic() + timeout
        for stream, sub in self._subs.items():
            while True:
                try:
                    info = await sub.consumer_info()
                    if not info.num_pending and not sub.pending_msgs and not self._busy[stream]:
                        break
                except Exception as exc:  # a consumer being recreated (ordered consumers reset on a gap)
                    log.debug("onair.catching_up", stream=stream, error=type(exc).__name__)
                if time.monotonic() > deadline:
                    log.warning("onair.not_caught_up", stream=stream, position=self.position[stream])
                    return False
                await asyncio.sleep(0.05)
        return True

    async def stop(self) -> None:
        for sub in self._subs.values():
            try:
                await sub.unsubscribe()
            except Exception as exc:
                log.debug("onair.unsubscribe_failed", error=type(exc).__name__)
        self._subs.clear()
