"""One pipeline stage on an in-memory JetStream bus, for the stages' handler tests.

What it emulates: a stage as it runs against nats-server. The stage's declared
handler behind its bus edge (``StageEdge(STAGE, settings, handler).router()``)
is included in a ``NatsBroker`` that FastStream's ``TestNatsBroker`` delivers in
memory (no server); the test publishes inputs as a pull consumer would receive
them and records every message the stage publishes on its declared output
subjects (``Wire``), in order.

Two things make TestNatsBroker behave like JetStream here:

* Outputs are published with ``stream=<its stream>``, and TestNatsBroker
  delivers a message that names a stream only to subscribers of a ``JStream``
  of that name, so each tap subscribes with the JStream of the subject it
  watches (``subjects.stream_of``).
* Inputs carry a ``$JS.ACK...`` reply subject (``StageHarness.js_reply``), as a
  pull consumer's messages do. The stage's edge reads ``num_delivered`` (retries,
  exhaustion) and the stream sequence (the dead letter's ``Nats-Msg-Id``) from
  ``msg.raw_message.metadata``, which nats-py parses out of that reply subject.
  A TestNatsBroker message has no reply subject of its own, and ``metadata``
  raises ``NotJSMessageError`` on it, so without the ack subject the edge would
  see neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from faststream.nats import JStream, NatsBroker, TestNatsBroker
from faststream.nats.annotations import NatsMessage
from pydantic import BaseModel

from kotae.bus.edge import StageEdge
from kotae.contracts import DeadLetterV1, subjects
from kotae.settings import Settings
from kotae.stage import Bus, Stage

# Poison inputs every stage dead-letters: (payload, content-type header, comment_id the letter names).
POISON = [
    pytest.param(b"not json", None, None, id="not-json"),
    pytest.param(b"not json", "application/json", None, id="not-json-typed-json"),
    pytest.param(
        json.dumps({"comment_id": "c-bad", "stream_id": "stream-1"}).encode(),
        "application/json",
        "c-bad",
        id="missing-fields",
    ),
]
POISON_SEQ = 7  # stream sequence of the poison input; the good one after it is POISON_SEQ + 1


@dataclass(frozen=True)
class Seen:
    subject: str
    headers: dict[str, Any]
    body: Any


class Wire:
    """Everything the stage publishes on ``patterns``, in order."""

    def __init__(self, broker: NatsBroker, *patterns: str) -> None:
        self.seen: list[Seen] = []
        self.taps = [self._tap(broker, p) for p in patterns]

    def _tap(self, broker: NatsBroker, pattern: str) -> Any:
        @broker.subscriber(pattern, stream=JStream(subjects.stream_of(pattern), declare=False))
        async def tap(body: Any, msg: NatsMessage) -> None:
            self.seen.append(Seen(msg.raw_message.subject, dict(msg.headers), body))

        return tap

    def only(self) -> Seen:
        assert len(self.seen) == 1, [s.subject for s in self.seen]
        return self.seen[0]

    def clear(self) -> None:
        self.seen.clear()


class StageHarness:
    """One stage's handler and edge on an in-memory broker: its input subject and stream, and its outputs watched."""

    def __init__(self, stage: Stage, *, in_subject: str | None = None) -> None:
        assert stage.consumes is not None
        self.stage = stage.name
        self.declared = stage
        self.in_subject = in_subject or stage.consumes.subject
        self.in_stream = subjects.stream_of(self.in_subject)
        self.outputs = (*stage.published,)

    def js_reply(self, seq: int, delivered: int = 1) -> str:
        """The ack subject a JetStream pull consumer's message carries (metadata source)."""
        return f"$JS.ACK.{self.in_stream}.{self.stage}.{delivered}.{seq}.{seq}.1764504000000000000.0"

    async def send(
        self,
        br: NatsBroker,
        payload: bytes,
        *,
        seq: int,
        subject: str | None = None,
        content_type: str | None = "application/json",
    ) -> None:
        """Publish one input (on ``in_subject`` unless told) as stream sequence ``seq``, first delivery."""
        headers = {"content-type": content_type} if content_type is not None else None
        subject = subject if subject is not None else self.in_subject
        await br.publish(payload, subject, stream=self.in_stream, headers=headers, reply_to=self.js_reply(seq))

    def stage_broker(self, settings: Settings) -> tuple[NatsBroker, Wire]:
        broker = NatsBroker()
        handler = self.declared.build_handler(settings, Bus(lambda: broker.connection.jetstream()))
        broker.include_router(StageEdge(self.declared, settings, handler).router())
        wire = Wire(broker, *self.outputs)
        return broker, wire

    async def only_output(self, settings: Settings, message: BaseModel, *, subject: str | None = None) -> Seen:
        """Run the stage on ``message`` (seq 1) and return the one message it published."""
        broker, wire = self.stage_broker(settings)
        async with TestNatsBroker(broker) as br:
            await self.send(br, message.model_dump_json().encode(), seq=1, subject=subject)
        return wire.only()

    async def poison_then(
        self, settings: Settings, payload: bytes, content_type: str | None, good: BaseModel
    ) -> tuple[Seen, Seen]:
        """Send ``payload`` then ``good`` through one stage; return the one output of each (the letter, then the answer to ``good``)."""
        broker, wire = self.stage_broker(settings)
        async with TestNatsBroker(broker) as br:
            await self.send(br, payload, seq=POISON_SEQ, content_type=content_type)
            letter_seen = wire.only()
            wire.clear()
            await self.send(br, good.model_dump_json().encode(), seq=POISON_SEQ + 1)
        return letter_seen, wire.only()

    def assert_poison_letter(self, letter_seen: Seen, payload: bytes, comment_id: str | None) -> DeadLetterV1:
        """``letter_seen`` is this stage's dead letter for ``payload``, sent by ``poison_then``."""
        assert letter_seen.subject == subjects.deadletter(self.stage)
        letter = DeadLetterV1.model_validate(letter_seen.body)
        assert letter.error_type == "poison"
        assert letter.stage == self.stage
        assert letter.subject == self.in_subject
        assert letter.payload == payload.decode()
        assert letter.payload_encoding == "utf-8"
        assert letter.deliveries == 1
        assert letter.comment_id == comment_id
        assert letter_seen.headers["Nats-Msg-Id"] == f"{self.stage}:deadletter:{self.in_stream}:{POISON_SEQ}"
        return letter
