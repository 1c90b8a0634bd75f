"""The on-air stage's HTTP server: each aired answer's audio by URL, the status, and the events as they happen.

Only the process that speaks serves it (it binds ``KOTAE_ONAIR_HTTP_HOST``:
``KOTAE_ONAIR_HTTP_PORT`` when it takes the lease and closes it when it stops),
so whatever is connected always talks to the one voice. Routes:

| route | what |
|---|---|
| ``GET /healthz`` | ``{"ok": true, "replica": …}`` |
| ``GET /status`` | mode, what is on air (with the time left), the queue in order with why, recent outcomes |
| ``GET /audio/<id>.wav`` | the audio of an aired answer (the ``audio_url`` of its ``started`` event); 404 once it is no longer kept |
| ``GET /events`` | the ``kotae.onair.v1`` events as Server-Sent Events, ``id`` = the event's sequence in its stream; a reconnect with ``Last-Event-ID`` gets what it missed (what this process still keeps) |

Pages are added to the same server by appending a function to :data:`ROUTES`:
``def add(app: web.Application, site: Site) -> None`` registers its routes with
``app.router`` and reads the state, the audio and the events through ``site``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web

from kotae.contracts import OnAirEventV1
from kotae.services.onair.speech import Audio
from kotae.services.onair.state import OnAirState
from kotae.services.onair.waiting import first_of

log = structlog.get_logger("kotae.onair")

#: Events kept for reconnecting clients.
FEED_KEPT = 1000
KEEPALIVE_S = 15.0


class AudioShelf:
    """The audio of the most recent airings, by id, for ``/audio/<id>.wav``."""

    def __init__(self, kept: int = 50) -> None:
        self.kept = kept
        self._audio: OrderedDict[str, Audio] = OrderedDict()

    def put(self, audio_id: str, audio: Audio) -> None:
        self._audio[audio_id] = audio
        self._audio.move_to_end(audio_id)
        while len(self._audio) > self.kept:
            self._audio.popitem(last=False)

    def get(self, audio_id: str) -> Audio | None:
        return self._audio.get(audio_id)


class EventFeed:
    """The on-air events in stream order, for Server-Sent Events: the last ``kept`` of them, and a wake-up."""

    def __init__(self, kept: int = FEED_KEPT) -> None:
        self._events: deque[tuple[int, OnAirEventV1]] = deque(maxlen=kept)
        # Set by the next event added, then replaced: an event that is never cleared cannot lose
        # an event added between a reader's look at the feed and its wait.
        self._next = asyncio.Event()
        self.latest = 0

    def add(self, seq: int, event: OnAirEventV1) -> None:
        if seq and seq <= self.latest:
            return
        self._events.append((seq, event))
        self.latest = max(self.latest, seq)
        self._next.set()
        self._next = asyncio.Event()

    def since(self, seq: int) -> list[tuple[int, OnAirEventV1]]:
        return [(s, e) for s, e in self._events if s > seq]

    async def follow(self, since: int, stop: asyncio.Event) -> AsyncIterator[tuple[int, OnAirEventV1] | None]:
        """Events after ``since`` as they come; None every ``KEEPALIVE_S`` of quiet."""
        last = since
        while not stop.is_set():
            added = self._next  # taken before the look below, with no await between them
            fresh = self.since(last)
            for seq, event in fresh:
                last = max(last, seq)
                yield seq, event
            if fresh:
                continue
            # The one timeout: a keepalive, so that a proxy keeps a quiet stream open. A stop ends the
            # wait at once: the server's shutdown waits for this handler to return.
            if not await first_of(added.wait(), stop.wait(), timeout=KEEPALIVE_S):
                yield None


@dataclass
class Site:
    """What the routes read: the state, the audio, the events, who is speaking."""

    state: OnAirState
    audio: AudioShelf
    feed: EventFeed
    replica: str
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    #: The overlay and the console (:class:`kotae.services.onair.pages.Pages`), when they are mounted.
    pages: Any = None


RouteAdder = Callable[[web.Application, Site], None]


def _core_routes(app: web.Application, site: Site) -> None:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"ok": True, "replica": site.replica})

    async def status(_: web.Request) -> web.Response:
        body = {**site.state.snapshot(), "replica": site.replica, "speaking": True}
        return web.json_response(body, dumps=lambda o: json.dumps(o, ensure_ascii=False))

    async def audio(request: web.Request) -> web.Response:
        found = site.audio.get(request.match_info["audio_id"])
        if found is None:
            raise web.HTTPNotFound(text="no such audio (aired too long ago, or never)")
        return web.Response(body=found.wav, content_type="audio/wav", headers={"Cache-Control": "max-age=3600"})

    async def events(request: web.Request) -> web.StreamResponse:
        try:
            since = int(request.headers.get("Last-Event-ID") or request.query.get("since") or 0)
        except ValueError:
            raise web.HTTPBadRequest(text="Last-Event-ID is the sequence number of an event") from None
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
            async for item in site.feed.follow(since, site.stopping):
                if item is None:
                    await response.write(b": keepalive\n\n")
                    continue
                seq, event = item
                data = event.model_dump_json()
                await response.write(f"id: {seq}\nevent: {event.event}\ndata: {data}\n\n".encode())
        return response

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/status", status)
    app.router.add_get(r"/audio/{audio_id:[A-Za-z0-9_-]+}.wav", audio)
    app.router.add_get("/events", events)


#: Functions that add routes to the server (the overlay and console pages append theirs).
ROUTES: list[RouteAdder] = [_core_routes]


class OnAirWeb:
    """The server, started and stopped with the speaker's lease.

    Example::

        web_server = OnAirWeb(site, host="127.0.0.1", port=8770)
        url = await web_server.start()     # 'http://127.0.0.1:8770'
        await web_server.stop()
    """

    def __init__(self, site: Site, *, host: str, port: int) -> None:
        self.site = site
        self.host = host
        self.port = port
        self.url: str | None = None
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        for add in ROUTES:
            add(app, self.site)
        return app

    async def start(self, *, retry_for_s: float = 30.0) -> str:
        """Bind and serve; while the address is in use (a speaker that is still stopping), try again."""
        self.site.stopping.clear()
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_for_s
        while True:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            try:
                await site.start()
                break
            except OSError as exc:
                if loop.time() > deadline:
                    await runner.cleanup()
                    raise
                log.info("onair.http_busy", host=self.host, port=self.port, error=str(exc)[:120])
                await asyncio.sleep(0.2)
        self._runner = runner
        port = runner.addresses[0][1] if runner.addresses else self.port  # the port picked when asked for 0
        self.url = f"http://{self.host}:{port}"
        log.info("onair.http_serving", url=self.url)
        return self.url

    async def stop(self) -> None:
        self.site.stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.url = None
