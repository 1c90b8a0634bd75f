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


async def test_a_stop_ends_a_quiet_event_stream_at_once_not_at_its_next_keepalive(monkeypatch) -> None:
    # The server's shutdown (a speaker losing its lease, a SIGTERM) waits for every open stream's
    # handler: a stream that noticed the stop only at its next keepalive held it that long.
    monkeypatch.setattr("kotae.services.onair.web.KEEPALIVE_S", 3600.0)
    feed, stop = EventFeed(kept=10), asyncio.Event()

    async def read() -> list[object]:
        return [item async for item in feed.follow(0, stop)]

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.05)  # the reader is waiting on the quiet feed
    stop.set()
    assert await asyncio.wait_for(reader, 30) == []  # ended, no keepalive yielded
