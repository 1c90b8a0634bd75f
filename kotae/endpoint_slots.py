"""Model calls in flight per endpoint across every process on the bus: a JetStream key-value semaphore.

The reranker, the generator and the verifier run as processes of their own. Pointed at
one local server with one slot (llama.cpp, Ollama on a laptop), each process's own limit
(``KOTAE_MODEL_CONCURRENCY``) still lets three calls reach the server at once; the server
queues them, and each client's timeout then counts the time spent queued behind the
others: a call that takes 40 s times out after 120. With
``KOTAE_MODEL_ENDPOINT_CONCURRENCY=N`` a process takes one of the endpoint's N slots in a
key-value bucket on the bus before it sends a call, so the server never holds more than N
calls and the timeout of a call measures that call.

A slot is the key ``<endpoint>.<i>``, created only when absent (``create``). Its holder
rewrites it while the call runs, and the bucket's TTL frees the slot of a process that
died holding it. A waiter tries again every :data:`POLL_S` or so: an expired key has no
event to wait for, and trying needs no subscription the stages' NATS users do not have.
A waiter also writes the key ``<endpoint>.wanted``; a process that has just released a slot
and finds it written by someone else gives them one poll to take the slot before it takes it
again, so the stages take turns: one stage's backlog does not keep the slot while the
comments ahead of it wait for their next stage.

Example::

    slots = EndpointSlots(lambda: nc.jetstream(), limit=1)
    async with slots.held("compatible|http://127.0.0.1:8080/v1"):
        ...  # the one call the endpoint serves now
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from nats.js import JetStreamContext

log = structlog.get_logger("kotae.providers")

#: The bucket every process's slots live in (stages with a model may use it: kotae.bus.permissions).
BUCKET = "kotae_model_slots"
#: A slot whose holder stopped rewriting it is free again after this long (a process that died).
HOLD_TTL_S = 15.0
#: How often a holder rewrites its slot.
REFRESH_S = HOLD_TTL_S / 3
#: About how often a waiter tries the slots again.
POLL_S = 0.2

# When this process last released a slot of each endpoint (see the module docstring).
_released_at: dict[str, float] = {}


def endpoint_key(endpoint: str) -> str:
    """The key prefix of an endpoint's slots (a URL holds characters a key may not)."""
    return hashlib.sha256(endpoint.encode()).hexdigest()[:16]


@dataclass
class _Hold:
    key: str
    revision: int


class EndpointSlots:
    """At most ``limit`` calls in flight per endpoint among every process that shares the bus."""

    def __init__(self, jetstream: Callable[[], JetStreamContext], limit: int, *, replicas: int = 1) -> None:
        if limit < 1:
            raise ValueError("an endpoint needs at least one slot")
        self._jetstream = jetstream
        self.limit = limit
        self.replicas = replicas
        self.holder = uuid.uuid4().hex.encode()
        self._kv: Any = None
        self._opening = asyncio.Lock()

    async def _bucket(self) -> Any:
        async with self._opening:
            if self._kv is None:
                from nats.js.api import KeyValueConfig
                from nats.js.errors import BucketNotFoundError

                js = self._jetstream()
                try:
                    self._kv = await js.key_value(BUCKET)
                except BucketNotFoundError:
                    config = KeyValueConfig(bucket=BUCKET, ttl=HOLD_TTL_S, history=1, replicas=self.replicas)
                    self._kv = await js.create_key_value(config)
        return self._kv

    @contextlib.asynccontextmanager
    async def held(self, endpoint: str) -> AsyncIterator[None]:
        """Wait for a free slot of ``endpoint`` (as long as it takes), hold it while the body runs."""
        kv = await self._bucket()
        name = endpoint_key(endpoint)
        hold = await self._take(kv, name)
        keeper = asyncio.create_task(self._keep(kv, hold), name="model-slot-keeper")
        try:
            yield
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            _released_at[name] = time.monotonic()
            try:
                await kv.delete(hold.key, last=hold.revision)
            except Exception as exc:  # taken over after it expired, or the bus is gone: the TTL decides
                log.warning("model_slot.release_failed", key=hold.key, error=f"{type(exc).__name__}: {exc}")

    async def _take(self, kv: Any, name: str) -> _Hold:
        from nats.js.errors import KeyWrongLastSequenceError

        wanted = f"{name}.wanted"  # written by whoever is waiting for one of the endpoint's slots
        if time.monotonic() - _released_at.get(name, float("-inf")) < POLL_S and await self._wanted(kv, wanted):
            await asyncio.sleep(POLL_S)  # give way: someone else waits for the slot just released
        waited_since = time.monotonic()
        waited = False
        while True:
            for i in range(self.limit):
                key = f"{name}.{i}"
                try:
                    revision = await kv.create(key, self.holder)
                except KeyWrongLastSequenceError:
                    continue  # held by someone
                if waited:
                    with contextlib.suppress(Exception):  # another waiter writes it again on its next try
                        await kv.delete(wanted)
                    log.debug("model_slot.waited", key=key, waited_s=round(time.monotonic() - waited_since, 1))
                return _Hold(key, revision)
            waited = True
            await kv.put(wanted, self.holder)
            await asyncio.sleep(POLL_S * (0.5 + random.random() / 2))

    async def _wanted(self, kv: Any, wanted: str) -> bool:
        """Whether another holder (another process, or another stage here) waits for a slot."""
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        try:
            entry = await kv.get(wanted)
        except (KeyNotFoundError, KeyDeletedError):
            return False
        return bool(entry.value) and entry.value != self.holder

    async def _keep(self, kv: Any, hold: _Hold) -> None:
        """Rewrite the slot while it is held, so its TTL frees it only when this process is gone."""
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                hold.revision = await kv.update(hold.key, self.holder, last=hold.revision)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the call goes on; at worst one more call reaches the endpoint
                log.warning("model_slot.refresh_failed", key=hold.key, error=f"{type(exc).__name__}: {exc}")
