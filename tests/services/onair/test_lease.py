"""kotae.services.onair.lease: one speaker at a time, on a real nats-server's KV with per-message TTLs."""

from __future__ import annotations

import asyncio
import time

import nats

from kotae.services.onair.lease import Lease, key_for, ttl_for


async def _bucket(url: str):  # noqa: ANN202
    nc = await nats.connect(url)
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="lease_test", history=1)
    return nc, js, kv


async def test_only_one_process_holds_the_lease_and_a_standby_takes_it_once_the_holder_stops_renewing(
    nats_url: str,
) -> None:
    nc, js, kv = await _bucket(nats_url)
    try:
        speaker = Lease(js, kv, "lease_test", "lease.s1", holder="a", lease_s=2.0)
        standby = Lease(js, kv, "lease_test", "lease.s1", holder="b", lease_s=2.0)
        assert await speaker.try_acquire() and speaker.held
        assert not await standby.try_acquire() and not standby.held
        assert await standby.current_holder() == "a"
        for _ in range(3):  # renewing keeps it past its TTL
            await asyncio.sleep(speaker.renew_every_s)
            assert await speaker.renew()
            assert not await standby.try_acquire()
        died = time.monotonic()  # the speaker stops renewing, as a killed process does
        while not await standby.try_acquire():
            await asyncio.sleep(standby.poll_s)
        took = time.monotonic() - died
        assert took < 2.0  # within the lease (the TTL is 70% of it)
        assert await standby.current_holder() == "b"
        assert not await speaker.renew() and not speaker.held  # the old speaker finds out and stays silent
    finally:
        await nc.close()


async def test_a_speaker_stops_trusting_its_lease_before_its_ttl_could_have_run_out(nats_url: str) -> None:
    nc, js, kv = await _bucket(nats_url)
    now = [0.0]
    try:
        lease = Lease(js, kv, "lease_test", "lease.s2", holder="a", lease_s=5.0, clock=lambda: now[0])
        assert await lease.try_acquire()
        now[0] = lease.ttl_s * 0.79
        assert lease.held
        now[0] = lease.ttl_s * 0.81  # no renewal got through since: the key may be gone soon
        assert not lease.held
    finally:
        await nc.close()


async def test_releasing_hands_the_lease_over_at_once(nats_url: str) -> None:
    nc, js, kv = await _bucket(nats_url)
    try:
        speaker = Lease(js, kv, "lease_test", "lease.s3", holder="a", lease_s=10.0)
        standby = Lease(js, kv, "lease_test", "lease.s3", holder="b", lease_s=10.0)
        assert await speaker.try_acquire()
        await speaker.release()
        assert await standby.try_acquire()  # no need to wait for the TTL
    finally:
        await nc.close()


def test_keys_and_ttls() -> None:
    assert key_for("lease", "default") == "lease.default"
    assert key_for("lease", "配信 1").startswith("lease.h") and len(key_for("lease", "配信 1")) == 31
    assert ttl_for(5.0) == 3 and ttl_for(2.0) == 1
