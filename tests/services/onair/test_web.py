"""kotae.services.onair.web: what the HTTP server keeps for its clients (the routes run in test_speaker.py)."""

from __future__ import annotations

import asyncio

from kotae.services.onair.events import about
from kotae.services.onair.policy import Entry
from kotae.services.onair.speech import Audio
from kotae.services.onair.web import AudioShelf, EventFeed
from tests.factories import ONAIR_AT, verified_answer


def test_the_audio_of_the_last_airings_stays_served() -> None:
    shelf = AudioShelf(kept=2)
    for i in range(3):
        shelf.put(f"a{i}", Audio(wav=b"RIFF", duration_ms=i, voice="v"))
    assert shelf.get("a0") is None and shelf.get("a2") is not None


async def test_a_reconnecting_client_gets_what_it_missed_in_stream_order() -> None:
    feed = EventFeed(kept=10)
    entry = Entry(verified_answer("c1", received_at=ONAIR_AT), 1, frozenset(), "")
    for seq, step in ((1, "queued"), (2, "started"), (3, "finished")):
        feed.add(seq, about(entry, step))
    feed.add(2, about(entry, "started"))  # delivered again: not repeated
    assert [(seq, e.event) for seq, e in feed.since(1)] == [(2, "started"), (3, "finished")]
    stop = asyncio.Event()
    seen = []
    async for item in feed.follow(0, stop):
        assert item is not None
        seen.append(item[0])
        if len(seen) == 3:
            stop.set()
            break
    assert seen == [1, 2, 3]
