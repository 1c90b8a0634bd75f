"""kotae.services.onair.waiting: a wait that a cancellation always ends."""

from __future__ import annotations

import asyncio

import pytest

from kotae.services.onair.waiting import first_of


async def test_a_cancellation_in_the_turn_the_awaited_thing_ends_is_not_swallowed() -> None:
    # The on-air stage's stop: the speaker's end changes the state (the awaited event is set) and
    # the status writer is cancelled before it runs again. asyncio.wait_for on 3.11 returns the
    # result there, and the writer went on while the shutdown waited for it.
    event = asyncio.Event()
    went_on = []

    async def writer() -> None:
        await first_of(event.wait(), timeout=60)
        went_on.append(True)

    task = asyncio.create_task(writer())
    await asyncio.sleep(0)
    event.set()
    await asyncio.sleep(0)  # the awaited event's own task has ended; the writer has not run yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert went_on == []


async def test_the_first_done_ends_the_wait_and_the_rest_are_cancelled() -> None:
    fast, slow = asyncio.Event(), asyncio.Event()
    fast.set()
    assert await first_of(fast.wait(), slow.wait(), timeout=60) is True
    assert await first_of(slow.wait(), timeout=0.01) is False  # nothing came: a timeout, not an error
