"""The on-air stage running in this process against a real nats-server, exactly as ``kotae serve onair`` runs it.

``onair_stage(**settings)`` starts it (its real voice, its HTTP server on a free
port) and returns an :class:`OnAirHarness`: publish answers, moderation events
and commands as the other stages and the operator would, and read what it aired.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy

from kotae.bus.topology import ensure_streams
from kotae.contracts import AnswerV1, ControlV1, ModerationV1, OnAirEventV1, subjects
from kotae.runtime import ServiceProcess, make_broker
from kotae.services.onair import STAGE
from kotae.services.onair.lease import key_for
from kotae.settings import Settings

#: What the tests change from the defaults: short answers need short gaps, no idle FAQ unless asked.
FAST = {
    "onair_http_port": 0,
    "onair_gap_s": 0.2,
    "onair_lease_s": 2.0,
    "onair_idle_s": 0.0,
    "onair_viewer_cooldown_s": 0.0,
    "stream_id": "stream-1",  # the stream of tests.factories' answers
}


class OnAirHarness:
    """One on-air process on the bus, and a connection that plays the rest of kotae around it."""

    def __init__(self, settings: Settings, url: str) -> None:
        self.settings = settings
        self.url = url
        self.events: list[OnAirEventV1] = []
        self.process: ServiceProcess | None = None
        self._nc: Any = None
        self._broker: Any = None
        self._sub: Any = None

    async def start(self, *, run_stage: bool = True) -> OnAirHarness:
        self._nc = await nats.connect(self.url)
        js = self._nc.jetstream()
        await ensure_streams(js, self.settings)

        async def collect(msg: Any) -> None:
            self.events.append(OnAirEventV1.model_validate_json(msg.data))

        config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        self._sub = await js.subscribe(subjects.ONAIR_ALL, cb=collect, ordered_consumer=True, config=config)
        if run_stage:
            await self.start_stage()
        return self

    async def start_stage(self) -> None:
        self._broker = make_broker(self.settings)
        await self._broker.start()
        self.process = ServiceProcess(STAGE, self.settings, self._broker, exit_on_end=False)
        await self.process.start()

    async def stop_stage(self) -> None:
        if self.process is not None:
            await self.process.stop()
            self.process = None
        if self._broker is not None:
            await self._broker.stop()
            self._broker = None

    async def close(self) -> None:
        await self.stop_stage()
        if self._nc is not None:
            await self._nc.close()

    # --- what the rest of kotae publishes -------------------------------------------

    async def answer(self, answer: AnswerV1, traceparent: str | None = None) -> None:
        headers = {"traceparent": traceparent} if traceparent else None
        await self._nc.jetstream().publish(
            subjects.answer(answer.outcome), answer.model_dump_json().encode(), headers=headers
        )

    async def moderate(self, event: ModerationV1) -> None:
        await self._nc.jetstream().publish(subjects.moderation(event.action), event.model_dump_json().encode())

    async def command(self, name: str, target: str | None = None, *, user: str = "operator") -> None:
        message = ControlV1(stream_id=self.settings.stream_id, command=name, target=target, issued_by=user)  # type: ignore[arg-type]
        await self._nc.jetstream().publish(subjects.control(name, user), message.model_dump_json().encode())

    # --- what aired -------------------------------------------------------------------

    def of(self, comment_id: str, event: str | None = None) -> list[OnAirEventV1]:
        return [e for e in self.events if e.comment_id == comment_id and (event is None or e.event == event)]

    def final(self, comment_id: str) -> OnAirEventV1 | None:
        return next((e for e in self.of(comment_id) if e.event in subjects.AIR_OUTCOMES), None)

    async def until(self, check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"not within {timeout:.0f}s: {what}; events: {[(e.comment_id, e.event) for e in self.events]}"
        )

    async def finals(self, *comment_ids: str, timeout: float = 60.0) -> dict[str, OnAirEventV1]:
        await self.until(lambda: all(self.final(c) for c in comment_ids), timeout, f"final outcomes of {comment_ids}")
        return {c: self.final(c) for c in comment_ids}  # type: ignore[misc]

    async def bucket_status(self) -> dict[str, Any] | None:
        """What the speaking process keeps in the stage's bucket for ``kotae onair status``."""
        try:
            kv = await self._nc.jetstream().key_value(self.settings.onair_kv_bucket)
            entry = await kv.get(key_for("status", self.settings.stream_id))
        except nats.js.errors.NotFoundError:
            return None
        return json.loads(entry.value) if entry.value else None

    async def http(self) -> str:
        """The URL the speaking process serves on (it picked a free port)."""

        async def bound() -> str | None:
            status = await self.bucket_status()
            return status.get("http") if status else None

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            url = await bound()
            if url:
                return url
            await asyncio.sleep(0.1)
        raise AssertionError("the on-air stage never said where it serves HTTP")


OnAirFactory = Callable[..., Awaitable[OnAirHarness]]


@pytest.fixture
async def onair_stage(nats_url: str, settings: Settings) -> AsyncIterator[OnAirFactory]:
    started: list[OnAirHarness] = []

    async def start(*, run_stage: bool = True, **overrides: Any) -> OnAirHarness:
        harness = OnAirHarness(settings.model_copy(update={"nats_url": nats_url, **FAST, **overrides}), nats_url)
        started.append(harness)
        return await harness.start(run_stage=run_stage)

    yield start
    for harness in started:
        await harness.close()
