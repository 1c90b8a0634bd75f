"""Publishing through a short bus outage: no stream leader for a moment, a reconnect, a lost ack.

JetStream answers a publish only once a stream's leader stored it. While a lost node's
streams elect new leaders (a few seconds), publishes fail with "no responders" or time
out, and an ack can be lost after the message was stored. Every kotae publish carries a
``Nats-Msg-Id``, so publishing the same bytes again is harmless: the stream keeps one
copy and says ``duplicate``. Retrying the publish itself, rather than failing the
handler, keeps an election from using up a comment's deliveries (which would end it
``failed`` while a redelivery from the new consumer leader answers it too) and from
repeating the handler's model calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
import nats.js.errors
import structlog

log = structlog.get_logger("kotae.bus")

T = TypeVar("T")

#: Faults of the bus that pass: no stream leader yet, a reconnect, a slow or lost ack.
BUS_UNAVAILABLE: tuple[type[BaseException], ...] = (
    nats.js.errors.NoStreamResponseError,
    nats.errors.NoRespondersError,
    nats.errors.TimeoutError,
    nats.errors.ConnectionReconnectingError,
)

#: How long a publish keeps trying through an outage before the error reaches the caller.
OUTAGE_DEADLINE_S = 60.0


async def through_outage(
    publish: Callable[[], Awaitable[T]], *, deadline_s: float = OUTAGE_DEADLINE_S, **about: object
) -> T:
    """Await ``publish()`` again, with a growing pause, while the bus is unavailable, up to ``deadline_s``.

    ``about`` names what is being published in the warning each retry logs.
    """
    deadline = time.monotonic() + deadline_s
    pause = 0.2
    while True:
        try:
            return await publish()
        except BUS_UNAVAILABLE as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("publish.retry", error=type(exc).__name__, pause_s=pause, **about)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)
