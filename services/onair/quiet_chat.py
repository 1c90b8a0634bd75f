"""Quiet chat: when nothing has waited for ``KOTAE_ONAIR_IDLE_S``, an FAQ entry of the stream's knowledge base airs.

The first FAQ entry (by id) that is valid today and has not aired in this show
airs, cited to itself, introduced as a question often asked; none left, nothing
airs. It never goes before a viewer: a question that arrives while the entry is
being synthesised airs first, and nothing airs while the stage is paused, in
hold mode or ended. It airs in one clip (an answer is said sentence by sentence).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

from kotae.contracts import OnAirEventV1
from kotae.contracts.v1 import Lang
from kotae.knowledge.records import KBRecord
from kotae.services.onair.airing import audio_id, on_air, text_only_ms
from kotae.services.onair.archive import SpeechArchive
from kotae.services.onair.events import EventPublisher, about_faq
from kotae.services.onair.knowledge import KnowledgeView
from kotae.services.onair.speech import Audio, Synthesizer, VoiceFailed, speech_text
from kotae.services.onair.state import OnAirState
from kotae.services.onair.web import AudioShelf

_FAQ_INTRO: dict[str, str] = {"ja": "よくいただく質問です。", "en": "A question we are often asked. "}
_QUESTION_JOIN: dict[str, str] = {"ja": "。", "en": ". "}


class QuietChat:
    """The FAQ filler of one stream's speaker.

    Example::

        quiet = QuietChat(state, publisher, synthesizer, kb, shelf, archive, holds, clock, idle_s=30, faq_kb="default")
        record = quiet.due(now)              # an FAQ entry to air now, or None
        if record: await quiet.air(record, stop, gap=speaker_gap, settle=speaker_settle)
    """

    def __init__(
        self,
        state: OnAirState,
        publisher: EventPublisher,
        speech: Synthesizer,
        kb: KnowledgeView,
        audio: AudioShelf,
        archive: SpeechArchive,
        holds: Callable[[], bool],
        clock: Callable[[], datetime],
        *,
        idle_s: float,
        faq_kb: str,
    ) -> None:
        self.state = state
        self.publisher = publisher
        self.speech = speech
        self.kb = kb
        self.audio = audio
        self.archive = archive
        self.holds = holds
        self.clock = clock
        self.idle_s = idle_s
        self.faq_kb = faq_kb

    def due(self, now: datetime) -> KBRecord | None:
        """The FAQ entry to air now: the chat has been quiet long enough and one has not aired in this show."""
        session, idle = self.state.session, self.state.idle_since
        if self.idle_s <= 0 or idle is None or session.hold or session.paused or session.ended:
            return None
        if (now - idle).total_seconds() < self.idle_s:
            return None
        return self.kb.faq(self.faq_kb, now.date(), frozenset(session.faq_aired))

    async def air(
        self,
        record: KBRecord,
        stop: asyncio.Event,
        *,
        gap: Callable[[asyncio.Event], Awaitable[None]],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        """Say ``record`` (after the gap), unless a viewer's question arrived meanwhile; stay on it until it
        has played or is skipped, settling the queue meanwhile."""
        lang: Lang = record.language
        text = speech_text(
            _FAQ_INTRO[lang] + (record.question or "") + _QUESTION_JOIN[lang] + (record.answer or ""), lang
        )
        key = f"faq:{record.id}"
        await self.speech.prepare(key, text, lang)
        try:
            audio: Audio | None = await self.speech.get(key)
            failed = None
        except VoiceFailed as exc:
            audio, failed = None, f"voice_failed: {exc.reason}"
        finally:
            self.speech.forget(key)
        await gap(stop)
        session = self.state.session
        if stop.is_set() or not self.holds() or self.state.entries or session.paused or session.hold or session.ended:
            return  # a viewer's question arrived meanwhile: it goes first
        now = self.clock()
        length_ms = audio.duration_ms if audio else text_only_ms(record.answer or "", lang)
        attempt = len(session.faq_aired) + 1
        aid = audio_id(key, int(now.timestamp()))
        if audio is not None:
            self.audio.put(aid, audio)
            self.archive.write(key, attempt, audio, now)
        fields = on_air(text, now, length_ms, audio, f"/audio/{aid}.wav", failed)
        started = about_faq(record, self.state.stream_id, "started", **fields)
        if await self.publisher.publish(started) is None:
            return
        seen = self.state.version
        while (left := (started.ends_at - self.clock()).total_seconds()) > 0:  # type: ignore[operator]
            await self.state.wait_changed(min(left, 0.5), since=seen)  # 0.5 s at most: the lease's trust
            seen = self.state.version
            if not self.holds():
                return
            if self.state.skip_requested and self.state.skip_requested[0] == key:
                await self.final(started, "skipped", reason=f"skipped by {self.state.skip_requested[1]}")
                return
            await settle()
        await self.final(started, "finished", reason=failed)

    async def final(self, started: OnAirEventV1, outcome: str, *, reason: str | None) -> None:
        """Publish how an FAQ airing ended (finished, or skipped)."""
        final = started.model_copy(update={"event": outcome, "reason": reason, "message_id": uuid.uuid4().hex})
        await self.publisher.publish(final.model_copy(update={"created_at": self.clock()}))
