"""The one voice: while this process holds the lease, it decides, synthesises and airs, one answer at a time.

A turn (:meth:`Speaker.run`):

1. **settle** — publish what is already decided: ``withdrawn`` for what was
   deleted, banned, blocked, rejected or superseded; ``skipped`` for everything
   once the stream has ended; ``queued`` for what arrived; ``shed`` beyond the
   backlog limit; and start synthesising the next few (pre-synthesis);
2. **choose** — :func:`kotae.services.onair.policy.choose`: ``expired`` and
   ``already_aired`` on the way, then the best-ranked answer that may air;
3. **air** — wait for the audio of its first sentence (a voice that fails after
   its retries gives a text-only airing, ``voice_failed``), keep the gap after the
   previous answer, check once more that it may still air, publish ``started``
   (the first sentence's clip, and when it ends by this server's clock), then a
   ``sentence`` event for each next sentence the moment its clip is ready (it
   plays right after the one before, or later if it was not ready in time), and
   stay on it until the last has played — or until it is skipped, withdrawn, or
   the stream ends. Synthesis starts only from a verified answer in the queue;
4. **quiet chat** — when nothing has waited for ``KOTAE_ONAIR_IDLE_S``, an FAQ
   entry of the stream's knowledge base that has not aired in this stream
   (:mod:`kotae.services.onair.quiet_chat`).

What an airing's events say (its sentences, until when, its audio) is
:mod:`kotae.services.onair.airing`; the aired audio kept on disk is
:mod:`kotae.services.onair.archive`.

A speaker that takes over finds what its predecessor left on air without an
outcome: an answer cut off before its audio ended airs again from the start,
once (``resumed``, attempt 2); one whose audio had ended is ``finished``
(:mod:`kotae.services.onair.takeover`).
Every publish first asks the lease (:class:`kotae.services.onair.lease.Lease`):
a process that is no longer sure it holds it says nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from kotae import metrics
from kotae.contracts import OnAirEventV1
from kotae.contracts.v1 import Lang, SpokenSentence
from kotae.services.onair.airing import Airing, audio_id, on_air, reading_ms, text_only_ms
from kotae.services.onair.archive import SpeechArchive
from kotae.services.onair.events import EventPublisher, about
from kotae.services.onair.knowledge import KnowledgeView
from kotae.services.onair.policy import Aired, Entry, Policy, choose, ended, thanked_instead, to_shed
from kotae.services.onair.quiet_chat import QuietChat
from kotae.services.onair.speech import Audio, Synthesizer, VoiceFailed
from kotae.services.onair.speech.lines import SpokenLines, joined
from kotae.services.onair.state import OnAir, OnAirState, now_utc
from kotae.services.onair.takeover import kept_ready, left_on_air
from kotae.services.onair.thanks import Thanks
from kotae.services.onair.web import AudioShelf

log = structlog.get_logger("kotae.onair")

#: A sentence ready later than this before the previous one ends starts this long after it was ready, so the
#: overlay has its clip in hand when it is due (a clip fetched late would start late, or be cut).
FETCH_LEAD_S = 0.15


class Speaker:
    """Speaks for one stream while ``lease.held`` (see the module docstring).

    Example::

        speaker = Speaker(state, publisher, synthesizer, lease, KnowledgeView(settings.kb_dir), shelf, settings)
        await speaker.run(stopping)        # returns when stopping is set or the lease is lost
    """

    def __init__(
        self,
        state: OnAirState,
        publisher: EventPublisher,
        speech: Synthesizer,
        holds: Callable[[], bool],
        kb: KnowledgeView,
        audio: AudioShelf,
        settings: object,
        *,
        clock: Callable[[], datetime] = now_utc,
    ) -> None:
        self.state = state
        self.publisher = publisher
        self.speech = speech
        self.holds = holds
        self.kb = kb
        self.audio = audio
        self.policy: Policy = state.policy
        self.clock = clock
        self.gap_s: float = settings.onair_gap_s  # type: ignore[attr-defined]
        self.idle_s: float = settings.onair_idle_s  # type: ignore[attr-defined]
        self.read_question: bool = settings.onair_read_question  # type: ignore[attr-defined]
        self.presynth: int = settings.onair_presynth  # type: ignore[attr-defined]
        self.archive = SpeechArchive(settings.onair_speech_dir)  # type: ignore[attr-defined]
        #: Quiet chat: an FAQ entry when nothing has waited for KOTAE_ONAIR_IDLE_S.
        self.quiet = QuietChat(
            state,
            publisher,
            speech,
            kb,
            audio,
            self.archive,
            holds,
            clock,
            idle_s=self.idle_s,
            faq_kb=settings.kb_for(state.stream_id),  # type: ignore[attr-defined]
        )
        #: Answers are said sentence by sentence (the voice starts on the first); FAQ filler in one clip.
        self.lines = SpokenLines(speech)
        self._prepared: set[str] = set()
        self._warmed = False
        self._waiting_at_finish = False

    # --- the loop -----------------------------------------------------------------

    def _may_speak(self, stop: asyncio.Event) -> bool:
        return not stop.is_set() and self.holds()

    async def run(self, stop: asyncio.Event) -> None:
        """Speak until ``stop`` is set or the lease is lost."""
        log.info("onair.speaking", stream_id=self.state.stream_id)
        await self._warm_up()
        while self._may_speak(stop):
            seen = self.state.version  # a change during what follows ends the wait below at once
            await self.settle()
            if self.state.on_air is not None:
                await self._take_over(self.state.on_air, stop)
                continue
            if await self._turn(stop):
                continue
            await self.state.wait_changed(self._quiet_for(), since=seen)
        log.info("onair.silent", stream_id=self.state.stream_id, stopping=stop.is_set())

    async def _warm_up(self) -> None:
        """Have the voice say a word nobody hears, in the background, once: its dictionary and the loudness
        pass load on the first call (about a second), which the first answer would otherwise wait for. Only the
        offline voice: a call to an engine or a hosted voice is not free, and it loads nothing here."""
        if self._warmed or getattr(self.speech.voice, "name", "") != "openjtalk":
            return
        self._warmed = True
        words: dict[Lang, str] = {"ja": "はい。", "en": "Yes."}
        for lang, word in words.items():
            await self.speech.prepare(("warm-up", lang), word, lang)

    def _quiet_for(self) -> float:
        """How long nothing can happen unless something changes: until the next expiry, cooldown or idle FAQ."""
        now = self.clock()
        waits = [1.0]
        max_age = self.policy.max_age(self.state.session.hold)
        for entry in self.state.entries.values():
            if max_age is not None:
                waits.append(max_age - entry.age_s(now) + 0.05)
        if self.state.idle_since is not None and self.idle_s > 0:
            waits.append(self.idle_s - (now - self.state.idle_since).total_seconds())
        return max(0.05, min(waits))

    # --- 1. what is already decided -------------------------------------------------

    async def settle(self) -> None:
        """Publish the outcomes already decided and the arrivals, and keep the next answers synthesised."""
        state, session = self.state, self.state.session
        for entry in state.waiting():
            if entry.key not in state.entries:
                continue
            if session.ended:
                await self._final(entry, "skipped", reason="stream_ended: the operator ended the stream")
                continue
            withdrawn = state.withdrawal(entry)
            superseded = None if withdrawn else self.kb.superseded(entry.answer)
            if withdrawn or superseded:
                reason, by = withdrawn or (superseded, None)
                await self._final(entry, "withdrawn", reason=reason, by=by)
        resuming = state.on_air.key if state.on_air is not None else None  # a takeover airing it again
        await self._end_what_cannot_air(resuming)
        order = state.waiting()
        for position, entry in enumerate(order, 1):
            if not entry.queued:
                queued = self._about(entry, "queued", queue_position=position, queue_length=len(order))
                if await self.publisher.publish(queued, entry.traceparent) is None:
                    return
        for entry, rank in to_shed((e for e in state.entries.values() if e.key != resuming), self.policy):
            await self._final(entry, "shed", reason=f"more than {self.policy.max_queue} answers waiting: ranked {rank}")
        metrics.ONAIR_QUEUE.set(len(state.entries))
        metrics.ONAIR_HELD.set(int(session.paused or session.hold or session.ended))
        await self._presynthesize()

    async def _end_what_cannot_air(self, resuming: str | None) -> None:
        """Repeats and expired answers end before the backlog is counted: they make no room in it."""
        now = self.clock()
        aired = self.state.recent_aired(now)
        for entry in self.state.waiting():
            if entry.key == resuming:
                continue
            over = ended(entry, aired, now, self.policy, hold=self.state.session.hold)
            if over and over[0] == "already_aired" and thanked_instead(entry, self.policy):
                self._thank_instead(entry, over[1], over[2])
            elif over:
                outcome, reason, credited = over
                await self._final(entry, outcome, reason=reason, credited_to=credited)

    async def _final(self, entry: Entry, outcome: str, **fields: object) -> bool:
        """Publish ``entry``'s final outcome and drop its speech; False when the lease is gone."""
        published = await self.publisher.publish(self._about(entry, outcome, **fields), entry.traceparent)
        self._forget(entry.key)
        if published is not None:
            log.info("onair.outcome", comment_id=entry.comment_id, outcome=outcome, reason=fields.get("reason"))
        return published is not None

    def _speech_of(self, entry: Entry) -> tuple[str, Lang]:
        """What the voice says for ``entry``: the same text the approval view shows (``state.spoken``)."""
        return self.state.spoken(entry)

    def _about(self, entry: Entry, event: str, **fields: object) -> OnAirEventV1:
        """An event about ``entry``; a thanks shows the line it says (it has no answer of its own to show)."""
        if entry.thanks is not None:
            fields.setdefault("answer", self.state.spoken.shown(entry))
        return about(entry, event, **fields)

    def _thank_instead(self, entry: Entry, reason: str, credited_to: str | None) -> None:
        """A Super Chat whose question aired already stays in the queue, to air as a thanks."""
        entry.thanks = Thanks(f"its question was answered already: {reason}", credited_to)
        self._forget(entry.key)  # the answer's speech, if it was prepared, is not what airs now
        log.info("onair.thanks_instead", comment_id=entry.comment_id, credited_to=credited_to)
        self.state.touch()

    async def _presynthesize(self) -> None:
        """Keep the next ``KOTAE_ONAIR_PRESYNTH`` answers that may air synthesised; drop what left the queue."""
        hold = self.state.session.hold
        wanted = []
        for entry in self.state.waiting():
            if hold and self.state.approved(entry) is None:
                continue
            wanted.append(entry)
            if len(wanted) >= max(1, self.presynth):
                break
        for entry in wanted:
            if entry.key not in self._prepared:
                text, lang = self._speech_of(entry)
                await self.lines.prepare(entry.key, text, lang)
                self._prepared.add(entry.key)
        on_air = self.state.on_air.key if self.state.on_air else None
        keep = {e.key for e in wanted} | {on_air}
        for key in list(self._prepared):
            if key not in keep and key not in self.state.entries:
                self._forget(key)

    def _forget(self, key: str) -> None:
        self.lines.forget(key)
        self._prepared.discard(key)

    # --- 2. choose --------------------------------------------------------------------

    async def _turn(self, stop: asyncio.Event) -> bool:
        """Air the next answer (or an FAQ entry) if any may air now; True when something was decided."""
        session = self.state.session
        if session.paused or session.ended:
            return False
        now = self.clock()
        choice = choose(
            self.state.waiting(),
            self.state.recent_aired(now),
            self.state.last_aired,
            now,
            self.policy,
            hold=session.hold,
        )
        for entry, past, how in choice.repeats:
            ago = (now - past.at).total_seconds()
            if thanked_instead(entry, self.policy):
                self._thank_instead(entry, _repeat_reason(how, past, ago), past.comment_id)
                continue
            await self._final(
                entry,
                "already_aired",
                reason=f"{how} to {past.comment_id}'s, aired {ago:.0f} s ago",
                credited_to=past.comment_id,
            )
        for entry, reason in choice.expired:
            await self._final(entry, "expired", reason=reason)
        if choice.entry is not None:
            await self._air(choice.entry, stop)
            return True
        record = self.quiet.due(now)
        if record is not None:
            await self.quiet.air(record, stop, gap=self._gap, settle=self.settle)
            return True
        return bool(choice.expired or choice.repeats)

    # --- 3. air -----------------------------------------------------------------------

    def _stop_reason(self, entry: Entry) -> tuple[str, str, str | None] | None:
        """(outcome, reason, operator) when ``entry`` must come off (or never go on) air now."""
        state = self.state
        if state.skip_requested and state.skip_requested[0] == entry.key:
            by = state.skip_requested[1]
            return "skipped", f"skipped by {by}", by
        if state.session.ended:
            return "skipped", "stream_ended: the operator ended the stream", None
        withdrawn = state.withdrawal(entry)
        if withdrawn:
            return "withdrawn", withdrawn[0], withdrawn[1]
        superseded = self.kb.superseded(entry.answer)
        if superseded:
            return "withdrawn", superseded, None
        return None

    async def _audio_for(self, entry: Entry, stop: asyncio.Event) -> tuple[Audio | None, str | None] | None:
        """The audio of the entry's first sentence, or (None, the voice's failure); None when it was decided
        otherwise meanwhile."""
        text, lang = self._speech_of(entry)
        if entry.key not in self._prepared or entry.key not in self.lines:
            await self.lines.prepare(entry.key, text, lang)
            self._prepared.add(entry.key)
        made = asyncio.ensure_future(self.lines.get(entry.key, 1))
        try:
            while not made.done():
                await asyncio.wait({made}, timeout=0.25)
                if not self._may_speak(stop):
                    return None
                await self.settle()
                if entry.key not in self.state.entries and not self._is_on_air(entry):
                    return None  # withdrawn, shed or ended while its audio was being made
            try:
                return made.result(), None
            except VoiceFailed as exc:
                log.warning("onair.voice_failed", comment_id=entry.comment_id, reason=exc.reason)
                return None, f"voice_failed: {exc.reason}"
            except KeyError:
                return None, "voice_failed: its speech was dropped before it aired"
        finally:
            if not made.done():
                made.cancel()

    def _is_on_air(self, entry: Entry) -> bool:
        return self.state.on_air is not None and self.state.on_air.key == entry.key

    async def _gap(self, stop: asyncio.Event) -> None:
        """Keep KOTAE_ONAIR_GAP_S of silence after the previous answer ended."""
        last = self.state.last_finished_at
        if last is None:
            return
        wait = self.gap_s - (self.clock() - last).total_seconds()
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)

    async def _air(self, entry: Entry, stop: asyncio.Event, *, attempt: int = 1) -> None:
        made = await self._audio_for(entry, stop)
        if made is None:
            return
        audio, voice_failed = made
        await self._gap(stop)
        if not self._may_speak(stop) or (entry.key not in self.state.entries and not self._is_on_air(entry)):
            return
        now = self.clock()
        stop_now = self._stop_reason(entry)
        max_age = self.policy.max_age(self.state.session.hold)
        too_old = max_age is not None and max_age < entry.age_s(now) and attempt == 1
        if stop_now or too_old:
            if stop_now:
                outcome, reason, by = stop_now
                await self._final(entry, outcome, reason=reason, by=by)
            else:
                await self._final(entry, "expired", reason=f"older than {max_age:g} s by the time it was ready")
            return
        text, lang = self._speech_of(entry)
        length_ms = audio.duration_ms if audio else text_only_ms(entry.answer.answer or text, lang)
        aid = audio_id(entry.key, attempt)
        first: SpokenSentence | None = None
        if audio is not None:
            lines = self.lines.lines(entry.key)
            self.audio.put(f"{aid}-1", audio)
            first = SpokenSentence(
                n=1,
                of=len(lines),
                text=lines[0],
                offset_ms=0,
                audio_ms=audio.duration_ms,
                audio_url=f"/audio/{aid}-1.wav",
            )
        started = self._about(
            entry,
            "started",
            **on_air(text, now, length_ms, audio, f"/audio/{aid}-1.wav", voice_failed),
            sentence=first,
            attempt=attempt,
            resumed=attempt > 1,
        )
        gap_since = self.state.last_finished_at
        if await self.publisher.publish(started, entry.traceparent) is None:
            return
        if gap_since is not None and self._waiting_at_finish:
            metrics.ONAIR_GAP_SECONDS.observe((now - gap_since).total_seconds())
        airing = Airing(started, aid, [audio] if audio is not None else [])
        await self._stay_on_air(entry, airing, stop)

    async def _stay_on_air(self, entry: Entry, airing: Airing, stop: asyncio.Event) -> None:
        """Until the last sentence has played: announce each next sentence as its clip is ready, keep settling
        the queue, and take it off air when it must go."""
        seen = self.state.version
        pending: asyncio.Future[Audio] | None = None
        try:
            while True:
                if pending is None and airing.said < airing.of:
                    pending = asyncio.ensure_future(self.lines.get(entry.key, airing.said + 1))
                left = (airing.ends_at - self.clock()).total_seconds()
                if pending is None and left <= 0:
                    break
                # A skip or a withdrawal wakes it at once, and so does the next sentence's clip; 0.5 s at most,
                # as the lease's trust runs out with time.
                changed = asyncio.ensure_future(self.state.wait_changed(min(max(left, 0.0), 0.5) or 0.5, since=seen))
                await asyncio.wait({changed} | ({pending} if pending else set()), return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                seen = self.state.version
                if not self.holds():
                    log.warning("onair.cut_off", comment_id=entry.comment_id, reason="the lease is no longer certain")
                    return
                stop_now = self._stop_reason(entry)
                if stop_now:
                    outcome, reason, by = stop_now
                    await self._final(entry, outcome, reason=reason, by=by, **airing.carried())
                    return
                if pending is not None and pending.done():
                    if not await self._next_sentence(entry, airing, pending):
                        return
                    pending = None
                await self.settle()
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
        self._waiting_at_finish = bool(self.state.entries)
        whole = joined(airing.clips) if len(airing.clips) == airing.of else None
        if whole is not None:
            self.audio.put(airing.aid, whole)
            self.archive.write(entry.comment_id, airing.started.attempt, whole, airing.started_at)
        elif airing.clips:
            for n, clip in enumerate(airing.clips, 1):
                self.archive.write(f"{entry.comment_id}-{n}", airing.started.attempt, clip, airing.started_at)
        await self._final(entry, "finished", reason=airing.reason, **airing.carried(whole))

    async def _next_sentence(self, entry: Entry, airing: Airing, made: asyncio.Future[Audio]) -> bool:
        """Put the next sentence on air: right after the previous one, or as soon as it can be fetched when it
        was late; text only (for its reading time) when its voice failed. False when the lease is gone."""
        n = airing.said + 1
        text = self.lines.lines(entry.key)[n - 1]
        try:
            clip: Audio | None = made.result()
        except (VoiceFailed, KeyError, asyncio.CancelledError) as exc:
            # A clip forgotten while it was made (its future cancelled, not this task) is a dropped one.
            why = exc.reason if isinstance(exc, VoiceFailed) else "its speech was dropped before it aired"
            log.warning("onair.voice_failed", comment_id=entry.comment_id, sentence=n, reason=why)
            airing.reason = airing.reason or f"voice_failed: sentence {n}: {why}"
            clip = None
        at = max(airing.ends_at, self.clock() + timedelta(seconds=FETCH_LEAD_S))
        offset_ms = round((at - airing.started_at).total_seconds() * 1000)
        url = None
        if clip is not None:
            url = f"/audio/{airing.aid}-{n}.wav"
            self.audio.put(f"{airing.aid}-{n}", clip)
        length_ms = clip.duration_ms if clip is not None else reading_ms(text, entry.answer.comment.lang)
        sentence = SpokenSentence(n=n, of=airing.of, text=text, offset_ms=offset_ms, audio_ms=length_ms, audio_url=url)
        airing.add(sentence, clip)
        event = self._about(entry, "sentence", **airing.carried(), sentence=sentence)
        event = event.model_copy(update={"audio_url": url})
        return await self.publisher.publish(event, entry.traceparent) is not None

    # --- taking over --------------------------------------------------------------

    async def stand_by(self, until: asyncio.Event) -> None:
        """While another process speaks, keep the audio of what it has on air, and of what is next in line,
        ready (:func:`kotae.services.onair.takeover.kept_ready`): a takeover then says it at once."""
        while not until.is_set():
            seen = self.state.version  # what changes while the speech is prepared is not missed
            wanted = kept_ready(self.state)
            for key in list(self._prepared):
                if key not in wanted:
                    self._forget(key)
            for key, entry in wanted.items():
                if key not in self._prepared:
                    text, lang = self._speech_of(entry)
                    await self.lines.prepare(key, text, lang)
                    self._prepared.add(key)
            waiter = asyncio.ensure_future(until.wait())
            changed = asyncio.ensure_future(self.state.wait_changed(5.0, since=seen))
            await asyncio.wait({waiter, changed}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            changed.cancel()

    async def _take_over(self, on_air: OnAir, stop: asyncio.Event) -> None:
        """What the previous speaker left on air: air it again from the start (once), or close it."""
        decision = left_on_air(on_air, self.clock(), self._stop_reason)
        entry, event = on_air.entry, on_air.event
        if decision.outcome is None and entry is not None:
            log.info("onair.resuming", comment_id=entry.comment_id, attempt=decision.attempt)
            self.state.entries[entry.key] = entry  # back in line for _air, at the front
            await self._air(entry, stop, attempt=decision.attempt)
        elif event.kind == "faq":
            await self.quiet.final(event, "skipped", reason=decision.reason)
        elif entry is None:
            closing = {
                "event": "skipped",
                "reason": decision.reason,
                "message_id": _new_id(),
                "created_at": self.clock(),
            }
            await self.publisher.publish(event.model_copy(update=closing))
        else:
            assert decision.outcome is not None
            await self._final(entry, decision.outcome, reason=decision.reason, by=decision.by, **decision.carried)


def _repeat_reason(how: str, past: Aired, ago: float) -> str:
    return f"{how} to {past.comment_id}'s, aired {ago:.0f} s ago"


def _new_id() -> str:
    return uuid.uuid4().hex
