"""The speaking process's loops wake on a change of the on-air state, not on a timer.

A real on-air process on a real nats-server, run as ``kotae serve onair`` runs it
(its lease, its HTTP server, its bucket); the test changes the state in the same
process, as the follower does when a command arrives, and times how long each
loop takes to show it. Each is compared, in the same run, with the fastest a
client could have learned it anyway (a request of the same view, a write of the
same bucket): a loop that polls would be many of those behind.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider

from kotae.contracts import ControlV1
from kotae.runtime import make_broker
from kotae.services.onair.lease import key_for
from kotae.services.onair.service import OnAirProcess, open_bucket
from kotae.stage import ServiceContext
from tests.services.onair.conftest import OnAirFactory, OnAirHarness

ROUNDS = 7
#: How many times a direct look's time a loop may take to show a change. Measured here: about 2 (status)
#: and under 1 (pages) now; when they polled every 0.5 s (status) and 0.1 s (pages), about 800 and 24.
WITHIN = 10


@asynccontextmanager
async def speaking(harness: OnAirHarness) -> AsyncIterator[OnAirProcess]:
    """An on-air process in this test's event loop, once it holds the lease and serves HTTP."""
    broker = make_broker(harness.settings)
    await broker.start()
    ctx = ServiceContext(broker=broker, tracer_provider=TracerProvider())
    process = OnAirProcess(harness.settings, ctx)
    task = asyncio.create_task(process.run(), name="onair-under-test")
    try:
        await harness.until(lambda: process.web.url is not None or task.done(), 30, "the process serving HTTP")
        assert not task.done(), task.exception()
        yield process
    finally:
        ctx.stopping.set()
        await asyncio.wait_for(task, 30)
        await broker.stop()


def toggle(process: OnAirProcess, round_: int) -> bool:
    """Pause on even rounds, resume on odd ones, as the follower applies an operator's command; the new mode."""
    command = "pause" if round_ % 2 == 0 else "resume"
    process.state.on_control(ControlV1(stream_id=process.stream_id, command=command, issued_by="operator"), "operator")
    return command == "pause"


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await action()
    return time.perf_counter() - started


async def write_and_watch(kv: Any, stream_id: str, round_: int) -> float:
    """How long a value put in the bucket takes to reach a watch of its key (the watch opened beforehand)."""
    probe = key_for("probe", stream_id)
    watch = await kv.watch(probe)
    try:
        await watch.updates(timeout=5)  # the watch's first answer: the key as it is now
        started = time.perf_counter()
        await kv.put(probe, str(round_).encode())
        while (entry := await watch.updates(timeout=5)) is None or entry.value != str(round_).encode():
            pass
        return time.perf_counter() - started
    finally:
        await watch.stop()


async def test_the_status_in_the_bucket_follows_each_change_at_once(onair_stage: OnAirFactory) -> None:
    harness = await onair_stage(run_stage=False)
    async with speaking(harness) as process:
        kv = await open_bucket(harness._nc.jetstream(), harness.settings)
        key = key_for("status", harness.settings.stream_id)
        watcher = await kv.watch(key)
        updates: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def pump() -> None:
            async for entry in watcher:
                if entry is not None and entry.value:
                    updates.put_nowait(json.loads(entry.value))

        pumping = asyncio.create_task(pump())
        try:
            seen, direct = [], []
            for round_ in range(ROUNDS):
                await asyncio.sleep(0.1)  # past the gap that joins a burst: this change comes alone
                while not updates.empty():
                    updates.get_nowait()
                paused = toggle(process, round_)

                async def shown(paused: bool = paused) -> None:
                    while (await updates.get())["mode"]["paused"] is not paused:
                        pass

                seen.append(await asyncio.wait_for(timed(shown), 10))
                # The same write and watch, done directly: what the status could at best cost.
                direct.append(await write_and_watch(kv, harness.settings.stream_id, round_))
        finally:
            pumping.cancel()
            await watcher.stop()
    assert statistics.median(seen) < WITHIN * statistics.median(direct), (seen, direct)


async def test_a_page_stream_sends_each_change_at_once(onair_stage: OnAirFactory) -> None:
    harness = await onair_stage(run_stage=False)
    async with speaking(harness) as process, httpx.AsyncClient(base_url=process.web.url, timeout=10) as http:
        async with http.stream("GET", "/overlay/stream") as stream:
            lines = stream.aiter_lines()

            async def next_state() -> dict[str, Any]:
                async for line in lines:
                    if line.startswith("data: "):
                        return json.loads(line[len("data: ") :])
                raise AssertionError("the stream ended")

            assert (await next_state())["mode"]["paused"] is False  # the whole state first
            seen, direct = [], []
            for round_ in range(ROUNDS):
                await asyncio.sleep(0.05)
                paused = toggle(process, round_)

                async def shown(paused: bool = paused) -> None:
                    while (await next_state())["mode"]["paused"] is not paused:
                        pass

                seen.append(await asyncio.wait_for(timed(shown), 10))

                async def requested() -> None:  # the same view, asked for: what the stream could at best cost
                    (await http.get("/overlay/state")).raise_for_status()

                direct.append(await timed(requested))
    assert statistics.median(seen) < WITHIN * statistics.median(direct), (seen, direct)
