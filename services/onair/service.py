"""The on-air stage's process: follow the streams, wait for the lease, speak while holding it.

``kotae serve onair`` runs :func:`run` for the life of the process (the stage's
``service``, see :class:`kotae.stage.Stage`). Every replica follows the streams
from the start of the rebuild window, so a standby knows everything the speaker
knows; the one holding the lease also serves HTTP and keeps the stage's bucket
current:

| key | what | written |
|---|---|---|
| ``lease.<stream>`` | who speaks (per-message TTL) | by the speaker, every third of the TTL |
| ``show.<stream>`` | the current show: its id and when it began (:mod:`kotae.services.onair.shows`) | when a process starts a show |
| ``session.<stream>`` | pause, hold, ended, blocked viewers, approvals, FAQ aired, last command included | when it changes |
| ``progress.<stream>`` | when the oldest answer still waiting was verified (a rebuild reads from there) | every few seconds |
| ``status.<stream>`` | what ``kotae onair status`` prints | on each change (a burst coalesced), and every few seconds |
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from datetime import datetime, timedelta

import nats.errors
import nats.js.errors
import structlog
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from kotae import metrics
from kotae.services.onair.events import EventPublisher
from kotae.services.onair.follow import Follower
from kotae.services.onair.knowledge import KnowledgeView
from kotae.services.onair.lease import Lease, key_for
from kotae.services.onair.pages import Pages, add_pages
from kotae.services.onair.policy import Policy
from kotae.services.onair.shows import establish
from kotae.services.onair.speaker import Speaker
from kotae.services.onair.speech import Synthesizer, voice_from_settings
from kotae.services.onair.spoken import SpokenText
from kotae.services.onair.state import OnAirState, Session, now_utc
from kotae.services.onair.thanks import ThanksWords
from kotae.services.onair.web import ROUTES, AudioShelf, EventFeed, OnAirWeb, Site
from kotae.settings import Settings
from kotae.stage import ServiceContext

log = structlog.get_logger("kotae.onair")

#: Back-to-back status writes are this far apart at least: a burst of changes (a replay queues dozens of
#: answers at once) costs a few writes of the bucket, not one per change. The first change after a quiet
#: spell is written at once.
STATUS_MIN_GAP_S = 0.05
#: The status is rewritten this often even when nothing changed (its age says the speaker is alive), and the
#: progress key (where a rebuild starts reading) is kept this current.
PROGRESS_EVERY_S = 5.0

if add_pages not in ROUTES:
    ROUTES.append(add_pages)  # /overlay and /console on the stage's HTTP server


async def open_bucket(js: JetStreamContext, settings: Settings) -> KeyValue:
    """The stage's KV bucket, created when missing (one value per key; the lease carries its own TTL)."""
    try:
        return await js.create_key_value(bucket=settings.onair_kv_bucket, history=1, replicas=settings.stream_replicas)
    except nats.js.errors.BadRequestError:  # it exists with other settings: use it as it is
        return await js.key_value(settings.onair_kv_bucket)


async def read_key(kv: KeyValue, key: str) -> bytes | None:
    try:
        entry = await kv.get(key)
    except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
        return None
    return entry.value


def replica_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def run(settings: Settings, ctx: ServiceContext) -> None:
    """The stage's service: see the module docstring."""
    await OnAirProcess(settings, ctx).run()


class OnAirProcess:
    """One on-air process: a follower always, the speaker while it holds the lease."""

    def __init__(self, settings: Settings, ctx: ServiceContext) -> None:
        self.settings = settings
        self.ctx = ctx
        self.replica = replica_name()
        self.stream_id = settings.stream_id
        spoken = SpokenText(read_question=settings.onair_read_question, thanks=ThanksWords.from_settings(settings))
        self.state = OnAirState(self.stream_id, Policy.from_settings(settings), spoken=spoken)
        self.feed = EventFeed()
        self.audio = AudioShelf(settings.onair_audio_kept)
        self.follower = Follower(self.state, on_event=self.feed.add)
        self.kb = KnowledgeView(settings.kb_dir)
        # Refuses to start when the pages may not be served as configured (a public address without a token).
        self.pages = Pages.build(settings, self.state, self.audio, self.kb, jetstream=ctx.jetstream)
        self.site = Site(self.state, self.audio, self.feed, self.replica, pages=self.pages)
        self.web = OnAirWeb(self.site, host=settings.onair_http_host, port=settings.onair_http_port)

    async def run(self) -> None:
        settings, js = self.settings, self.ctx.jetstream()
        kv = await open_bucket(js, settings)
        session = Session.from_json(await read_key(kv, key_for("session", self.stream_id)))
        self.state.restore(session)
        since = now_utc() - timedelta(seconds=self.state.window_s)
        show, new = await establish(kv, key_for("show", self.stream_id), settings.onair_show, first_since=since)
        self.state.begin_show(show, new=new)
        if new:  # a standby starting after this reads the new show's session, not the last one's
            await kv.put(key_for("session", self.stream_id), self.state.session.to_json())
        progress = await read_key(kv, key_for("progress", self.stream_id))
        if progress:
            with contextlib.suppress(ValueError, KeyError):
                since = min(since, datetime.fromisoformat(json.loads(progress)["at"]))
        await self.follower.start(js, since=since, control_after=session.control_seq)
        speech = Synthesizer.from_settings(voice_from_settings(settings), settings)
        lease = Lease(
            js, kv, settings.onair_kv_bucket, key_for("lease", self.stream_id), holder=self.replica,
            lease_s=settings.onair_lease_s,
        )  # fmt: skip
        publisher = EventPublisher(
            self.ctx.broker,
            replica=self.replica,
            tracer_provider=self.ctx.tracer_provider,
            applied=self.state.on_event,
            holds=lambda: lease.held,
            show=lambda: self.state.show.id if self.state.show else None,
        )
        speaker = Speaker(self.state, publisher, speech, lambda: lease.held, self.kb, self.audio, settings)
        log.info("onair.following", replica=self.replica, stream_id=self.stream_id, since=since.isoformat())
        self.ctx.ready.set()
        try:
            while not self.ctx.stopping.is_set():
                if await lease.try_acquire():
                    await self._speak(lease, speaker, kv)
                    continue
                standing_by = asyncio.Event()
                standby = asyncio.create_task(speaker.stand_by(standing_by), name="onair-standby")
                try:
                    while not self.ctx.stopping.is_set() and not await lease.try_acquire():
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self.ctx.stopping.wait(), lease.poll_s)
                finally:
                    standing_by.set()
                    await standby
                if lease.held:
                    await self._speak(lease, speaker, kv)
        finally:
            await self.follower.stop()
            await speech.aclose()
            await self.web.stop()

    async def _speak(self, lease: Lease, speaker: Speaker, kv: KeyValue) -> None:
        """Hold the lease: catch up, serve HTTP, speak; on the way out, say so and (when stopping) let go."""
        keeping = asyncio.Event()
        keeper = asyncio.create_task(lease.keep(keeping), name="onair-lease")
        reporter: asyncio.Task[None] | None = None
        metrics.ONAIR_SPEAKING.set(1)
        try:
            while not await self.follower.caught_up(timeout=10.0):
                if self.ctx.stopping.is_set() or not lease.held:
                    return
            try:
                url: str | None = await self.web.start(retry_for_s=min(30.0, self.settings.onair_lease_s * 2))
            except OSError as exc:  # the address is someone else's: speak anyway, say so
                log.error("onair.http_unavailable", host=self.settings.onair_http_host,
                          port=self.settings.onair_http_port, error=str(exc)[:200])  # fmt: skip
                url = None
            reporter = asyncio.create_task(self._report(kv, lease, url), name="onair-status")
            done = asyncio.Event()
            stop = asyncio.Event()

            async def watch() -> None:  # stop speaking on SIGTERM (the answer on air still ends)
                waiter = asyncio.ensure_future(self.ctx.stopping.wait())
                finished = asyncio.ensure_future(done.wait())
                await asyncio.wait({waiter, finished}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                finished.cancel()
                stop.set()

            watcher = asyncio.create_task(watch())
            try:
                await speaker.run(stop)
            finally:
                done.set()
                await watcher
        finally:
            metrics.ONAIR_SPEAKING.set(0)
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
            await self.web.stop()
            if lease.held:
                await self._write_status(kv, None, speaking=False)
            keeping.set()
            await keeper
            if self.ctx.stopping.is_set():
                await lease.release()

    async def _report(self, kv: KeyValue, lease: Lease, url: str | None) -> None:
        """Keep the bucket's status, session and progress current while speaking.

        It wakes on each change of the state (a change made while it writes is never missed: the
        version is read before the writes) and otherwise only when the heartbeat is due.
        """
        version = -1
        session = b""
        loop = asyncio.get_running_loop()
        progress_at = status_at = loop.time() - PROGRESS_EVERY_S
        while lease.held:
            seen = self.state.version  # before the awaits below: a change during them ends the wait at once
            try:
                if seen != version or loop.time() - status_at >= PROGRESS_EVERY_S:
                    gap = status_at + STATUS_MIN_GAP_S - loop.time()
                    if gap > 0:  # right after a write: let the rest of a burst join this one
                        await asyncio.sleep(gap)
                        seen = self.state.version
                    version, status_at = seen, loop.time()
                    await self._write_status(kv, url, speaking=True)
                now_session = self.state.session.to_json()
                if now_session != session:
                    await kv.put(key_for("session", self.stream_id), now_session)
                    session = now_session
                if loop.time() - progress_at >= PROGRESS_EVERY_S:
                    progress_at = loop.time()
                    await kv.put(key_for("progress", self.stream_id), json.dumps({"at": self._oldest()}).encode())
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.APIError) as exc:
                log.warning("onair.status_not_written", error=type(exc).__name__)
            # The one timeout: the heartbeat (the status's age, the progress key). Losing the lease
            # cancels this task, so nothing else needs a timer here.
            due = min(status_at, progress_at) + PROGRESS_EVERY_S - loop.time()
            await self.state.wait_changed(max(due, STATUS_MIN_GAP_S), since=seen)

    def _oldest(self) -> str:
        """When the oldest answer still without an outcome was verified (now, when none waits)."""
        times = [e.answer.created_at for e in self.state.entries.values()]
        if self.state.on_air is not None and self.state.on_air.entry is not None:
            times.append(self.state.on_air.entry.answer.created_at)
        return (min(times) if times else now_utc()).isoformat()

    async def _write_status(self, kv: KeyValue, url: str | None, *, speaking: bool) -> None:
        body = {**self.state.snapshot(), "replica": self.replica, "speaking": speaking, "http": url}
        with contextlib.suppress(Exception):
            await kv.put(key_for("status", self.stream_id), json.dumps(body, ensure_ascii=False).encode())
