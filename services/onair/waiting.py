"""Waiting for the first of several things, in a way a cancellation always ends.

``asyncio.wait_for`` on Python 3.11 swallows a cancellation that arrives in the same loop turn as
the awaited thing finishing: the caller gets the result, keeps running, and whoever cancelled it
waits. On air that happened on every stop: the speaker's end changes the state, the status
writer's wait for that change finished as it was cancelled, and the writer went round its loop
again while the stage's shutdown waited for it. ``asyncio.wait`` never swallows a cancellation.

Example::

    changed = await first_of(state_changed.wait(), stopping.wait(), timeout=5.0)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def first_of(*waits: Awaitable[Any], timeout: float | None = None) -> bool:
    """Wait until the first of ``waits`` is done, cancelling the rest; False when none was within ``timeout``."""
    tasks = {asyncio.ensure_future(w) for w in waits}
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    return bool(done)
