"""The speaker's lease: one key in the stage's JetStream KV bucket, with a per-message TTL.

Whoever creates the key speaks; it renews the key (a compare-and-set on its own
revision) every third of the TTL, and the server drops the key a TTL after the
last renewal, so a speaker that dies loses it without anyone deleting it. A
standby tries to create the key every ``poll_s`` and takes over once it is gone.

A speaker trusts its lease only until a margin before the TTL has run out since
it last *sent* a renewal the server accepted (:meth:`Lease.held`): the server's
TTL counts from when it stored the renewal, which is later, so by the time the
key can have expired for a standby the old speaker has already stopped talking.
With ``KOTAE_ONAIR_LEASE_S`` = 5 the TTL is 3 s (whole seconds: the server's
TTL header), a renewal every second, and a standby polling every 0.25 s takes
over within about 3.3 s of the speaker's death.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable

import nats.errors
import nats.js.errors
import structlog
from nats.js import JetStreamContext
from nats.js.api import Header
from nats.js.kv import KeyValue

log = structlog.get_logger("kotae.onair")

#: Share of the TTL after the last accepted renewal during which a speaker still trusts its lease.
TRUST = 0.8


def key_for(kind: str, stream_id: str) -> str:
    """A KV key for one stream's ``kind`` (lease, session, status, progress): KV keys allow few characters."""
    if re.fullmatch(r"[A-Za-z0-9_=-]{1,64}", stream_id):
        return f"{kind}.{stream_id}"
    return f"{kind}.h{hashlib.sha256(stream_id.encode()).hexdigest()[:24]}"


def ttl_for(lease_s: float) -> int:
    """The key's TTL in whole seconds: 70% of the lease, so a standby takes over within the lease."""
    return max(1, int(lease_s * 0.7))


class Lease:
    """One holder at a time for ``key``.

    Example::

        lease = Lease(js, kv, "kotae_onair", "lease.default", holder="host-a:4242", lease_s=5.0)
        if await lease.try_acquire():
            ...                      # speak, calling `await lease.renew()` every `lease.renew_every_s`
            lease.held               # False once a renewal failed or is overdue
        await lease.release()
    """

    def __init__(
        self,
        js: JetStreamContext,
        kv: KeyValue,
        bucket: str,
        key: str,
        *,
        holder: str,
        lease_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.js = js
        self.kv = kv
        self.bucket = bucket
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_for(lease_s)
        self.renew_every_s = self.ttl_s / 3
        self.poll_s = min(0.5, lease_s / 20)
        self.clock = clock
        self.revision: int | None = None
        self._trusted_until = 0.0
        self._lock = asyncio.Lock()

    @property
    def _subject(self) -> str:
        return f"$KV.{self.bucket}.{self.key}"

    def _value(self) -> bytes:
        return json.dumps({"holder": self.holder, "ttl_s": self.ttl_s}).encode()

    @property
    def held(self) -> bool:
        """Whether this process may speak now."""
        return self.revision is not None and self.clock() < self._trusted_until

    async def try_acquire(self) -> bool:
        """Take the lease if nobody holds it."""
        async with self._lock:
            sent = self.clock()
            try:
                self.revision = await self.kv.create(self.key, self._value(), msg_ttl=self.ttl_s)
            except nats.js.errors.KeyWrongLastSequenceError:
                return False
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.APIError) as exc:
                log.warning("onair.lease_unavailable", error=f"{type(exc).__name__}: {exc}")
                return False
            self._trusted_until = sent + self.ttl_s * TRUST
            log.info("onair.lease_acquired", holder=self.holder, key=self.key, ttl_s=self.ttl_s)
            return True

    async def renew(self) -> bool:
        """Extend the lease; False (and no longer held) when another process holds it now."""
        async with self._lock:
            if self.revision is None:
                return False
            sent = self.clock()
            try:
                ack = await self.js.publish(
                    self._subject,
                    self._value(),
                    headers={Header.EXPECTED_LAST_SUBJECT_SEQUENCE: str(self.revision)},
                    msg_ttl=self.ttl_s,
                    timeout=max(0.5, self.ttl_s / 3),
                )
            except nats.js.errors.APIError as exc:
                if exc.err_code in (10071, 10164):  # the key is someone else's now
                    log.warning("onair.lease_lost", holder=self.holder, key=self.key)
                    self.revision = None
                    return False
                log.warning("onair.lease_renewal_failed", error=f"{type(exc).__name__}: {exc}")
                return self.held
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.errors.ConnectionClosedError) as exc:
                log.warning("onair.lease_renewal_failed", error=type(exc).__name__)
                return self.held  # try again next time; the trust runs out on its own
            self.revision = ack.seq
            self._trusted_until = sent + self.ttl_s * TRUST
            return True

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew until ``stop`` is set or the lease is lost."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.renew_every_s)
            if stop.is_set():
                return
            if not await self.renew() and self.revision is None:
                return

    async def release(self) -> None:
        """Give the lease up at once (a standby takes over on its next poll)."""
        async with self._lock:
            if self.revision is None:
                return
            with contextlib.suppress(Exception):
                await self.kv.delete(self.key, last=self.revision)
            self.revision = None
            self._trusted_until = 0.0
            log.info("onair.lease_released", holder=self.holder, key=self.key)

    async def current_holder(self) -> str | None:
        """Who holds the lease now, as the bucket says (None: nobody)."""
        try:
            entry = await self.kv.get(self.key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        try:
            return json.loads(entry.value or b"{}").get("holder")
        except ValueError:
            return None
