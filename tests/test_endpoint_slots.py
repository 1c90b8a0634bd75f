"""An endpoint's slots shared by processes on a real nats-server, against a one-slot fake model server.

Each "process" here is a thread with its own event loop and its own NATS connection, so
the per-process limit (one semaphore per event loop) cannot serialise the calls: only the
shared slots can.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import nats
import pytest

from kotae import endpoint_slots
from kotae.endpoint_slots import BUCKET, EndpointSlots, endpoint_key
from kotae.providers import ChatModel, ModelUnavailable
from kotae.settings import load_settings
from kotae.stage import Bus
from tests.fakes.model_server import FakeModelServer

#: Each call takes this long at the server; the client allows CALL_S * 2.5, so a call queued
#: behind two others at the server times out, one that waited for a shared slot does not.
CALL_S = 0.4
TIMEOUT_S = CALL_S * 2.5


def _process(url: str, fake: FakeModelServer, calls: int, shared: int) -> list[str]:
    """One stage process: ``calls`` model calls at once, each ending "ok" or in its error."""

    async def run() -> list[str]:
        nc = await nats.connect(url)
        settings = load_settings(model_timeout_s=TIMEOUT_S, model_endpoint_concurrency=shared)
        model = ChatModel.from_settings(settings, f"compatible:{fake.url}/v1|local", setting="KOTAE_GENERATOR_MODEL")
        model.share_slots(settings, Bus(nc.jetstream))
        model.concurrency = 8  # this process alone would send all its calls at once

        async def one() -> str:
            try:
                await model.acomplete(system="s", user="u")
                return "ok"
            except ModelUnavailable as exc:
                return str(exc)

        try:
            return await asyncio.gather(*(one() for _ in range(calls)))
        finally:
            await model.aclose()
            await nc.close()

    return asyncio.run(run())


def _processes(url: str, fake: FakeModelServer, *, shared: int) -> list[str]:
    with ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(_process, url, fake, 2, shared) for _ in range(3)]
        return [outcome for run in runs for outcome in run.result()]


def test_calls_of_three_processes_wait_for_the_endpoints_one_slot_and_none_times_out(nats_server: str) -> None:
    with FakeModelServer("answer", delay_s=CALL_S, slots=1) as fake:
        outcomes = _processes(nats_server, fake, shared=1)
    assert outcomes == ["ok"] * 6
    assert fake.busiest == 1  # the server never had a call waiting behind another


def test_without_shared_slots_the_calls_queued_at_a_one_slot_server_time_out(nats_server: str) -> None:
    """What the shared slots prevent: each process's own limit lets all six reach the server."""
    with FakeModelServer("answer", delay_s=CALL_S, slots=1) as fake:
        outcomes = _processes(nats_server, fake, shared=0)
    assert fake.busiest > 1
    assert any("timeout" in outcome for outcome in outcomes), outcomes


async def test_a_slot_held_past_the_buckets_ttl_by_a_live_call_stays_held(
    nats_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoint_slots, "HOLD_TTL_S", 1.0)
    monkeypatch.setattr(endpoint_slots, "REFRESH_S", 0.3)
    nc = await nats.connect(nats_server)
    try:
        first, second = EndpointSlots(nc.jetstream, 1), EndpointSlots(nc.jetstream, 1)
        released = threading.Event()
        order: list[str] = []

        async def long_call() -> None:
            async with first.held("compatible|http://model"):
                order.append("first took")
                await asyncio.sleep(2.5)  # longer than the TTL: the holder rewrites its slot
                order.append("first done")
            released.set()

        async def waiting_call() -> None:
            await asyncio.sleep(0.1)
            async with second.held("compatible|http://model"):
                order.append("second took")

        await asyncio.gather(long_call(), waiting_call())
    finally:
        await nc.close()
    assert order == ["first took", "first done", "second took"]


async def test_the_slot_of_a_process_that_died_holding_it_is_free_after_the_ttl(
    nats_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoint_slots, "HOLD_TTL_S", 1.0)
    nc = await nats.connect(nats_server)
    try:
        slots = EndpointSlots(nc.jetstream, 1)
        kv = await slots._bucket()
        # A process took the slot and died: nothing rewrites or releases it.
        await kv.create(f"{endpoint_key('compatible|http://model')}.0", b"dead")
        started = time.monotonic()
        async with slots.held("compatible|http://model"):
            waited = time.monotonic() - started
        status = await nc.jetstream().stream_info(f"KV_{BUCKET}")
    finally:
        await nc.close()
    assert waited > 0.5  # it did wait for the dead holder's slot ...
    assert status.config.max_age == 1.0  # ... until the bucket's TTL freed it


def test_stages_contending_for_one_slot_take_turns(nats_server: str) -> None:
    """Two processes, four calls each, one slot: neither backlog keeps the slot to itself."""

    def process(name: str, fake: FakeModelServer) -> None:
        async def run() -> None:
            nc = await nats.connect(nats_server)
            settings = load_settings(model_timeout_s=30.0, model_endpoint_concurrency=1)
            model = ChatModel.from_settings(
                settings, f"compatible:{fake.url}/v1|{name}", setting="KOTAE_RERANKER_MODEL"
            )
            model.share_slots(settings, Bus(nc.jetstream))
            try:
                await asyncio.gather(*(model.acomplete(system="s", user="u") for _ in range(4)))
            finally:
                await model.aclose()
                await nc.close()

        asyncio.run(run())

    with FakeModelServer("answer", delay_s=0.15, slots=1) as fake:
        with ThreadPoolExecutor(2) as pool:
            for run in [pool.submit(process, name, fake) for name in ("reranker", "verifier")]:
                run.result()
    served = [r["body"]["model"] for r in fake.requests]
    longest = max(len(list(group)) for _, group in itertools.groupby(served))
    assert sorted(served) == ["reranker"] * 4 + ["verifier"] * 4
    assert longest <= 2, served
