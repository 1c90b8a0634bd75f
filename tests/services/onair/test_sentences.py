"""The voice starts on the first sentence, and says nothing that was not verified.

The speaker runs for real (the offline voice, the bus, the stage's state); the
voice is the real Open JTalk voice, wrapped only to note what it was asked to say.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import nats
import pytest

from kotae.bus.topology import ensure_streams
from kotae.contracts import AnswerV1, OnAirEventV1
from kotae.contracts.v1 import Lang
from kotae.runtime import make_broker
from kotae.services.onair.events import EventPublisher
from kotae.services.onair.knowledge import KnowledgeView
from kotae.services.onair.policy import Policy
from kotae.services.onair.speaker import Speaker
from kotae.services.onair.speech import Audio, Synthesizer, speech_text, voice_from_settings
from kotae.services.onair.speech.sentences import sentences
from kotae.services.onair.spoken import SpokenText
from kotae.services.onair.state import OnAirState
from kotae.services.onair.thanks import ThanksWords
from kotae.services.onair.web import AudioShelf
from kotae.settings import Settings
from tests.factories import verified_answer
from tests.services.onair.conftest import FAST

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

THREE = "保育料は月額1万5千円を上限にします[1]。第2子以降は無料です[1]。申し込みは区役所で受け付けます[1]。"


class HeardVoice:
    """The real voice, noting each text it is asked to say and when it finished making it."""

    def __init__(self, voice: Any) -> None:
        self.voice = voice
        self.name = voice.name
        self.heard: list[tuple[str, datetime]] = []

    async def synthesize(self, text: str, lang: Lang) -> Audio:
        audio = await self.voice.synthesize(text, lang)
        self.heard.append((text, datetime.now(UTC)))
        return audio

    async def aclose(self) -> None:
        await self.voice.aclose()


def unverified(comment_id: str, outcome: str, text: str) -> AnswerV1:
    """An answer that did not pass: its text must never reach the voice."""
    return verified_answer(comment_id, answer=text, received_at=datetime.now(UTC)).model_copy(
        update={"outcome": outcome, "reason": "not supported by the documents", "verdict": 2}
    )


async def test_only_a_verified_answer_is_synthesised_and_it_airs_sentence_by_sentence(
    nats_url: str, settings: Settings
) -> None:
    s = settings.model_copy(update={"nats_url": nats_url, **FAST})
    nc = await nats.connect(nats_url)
    await ensure_streams(nc.jetstream(), s)
    broker = make_broker(s)
    await broker.start()
    state = OnAirState(
        s.stream_id,
        Policy.from_settings(s),
        spoken=SpokenText(read_question=False, thanks=ThanksWords.from_settings(s)),
    )
    voice = HeardVoice(voice_from_settings(s))
    speech = Synthesizer(voice)
    published: list[OnAirEventV1] = []

    def applied(event: OnAirEventV1) -> None:
        published.append(event)
        state.on_event(event)

    publisher = EventPublisher(broker, replica="test", applied=applied)
    speaker = Speaker(state, publisher, speech, lambda: True, KnowledgeView(s.kb_dir), AudioShelf(10), s)
    state.on_answer(unverified("c-rejected", "rejected", "保育料は毎月十万円かかります[1]。"), seq=1)
    state.on_answer(unverified("c-unanswered", "unanswered", "給食はすべて有料になります[1]。"), seq=2)
    good = verified_answer("c-good", answer=THREE, received_at=datetime.now(UTC))
    state.on_answer(good, seq=3)
    stop = asyncio.Event()
    events: list[Any] = []
    task = asyncio.create_task(speaker.run(stop))
    try:
        for _ in range(600):
            events = [e for e in state.recent if e.comment_id == "c-good"]
            if events:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 30)
        await speech.aclose()
        await voice.aclose()
        await broker.stop()
        await nc.close()
    assert events and events[-1].event == "finished", events
    warm_up = {"はい。", "Yes."}  # what the offline voice says, unheard, as the speaker starts (its dictionary loads)
    said = [text for text, _ in voice.heard if text not in warm_up]
    # The voice was asked for the verified answer's sentences, each once, in order, and for nothing else.
    assert said == sentences(speech_text(good.answer or "", "ja")) and len(said) == 3, said
    assert not any("十万円" in t or "有料" in t for t in said)
    # Nothing unverified aired either; the verified one went on air with its first sentence, while the rest was made.
    assert {e.comment_id for e in published} == {"c-good"}
    steps = [e.event for e in published]
    assert steps == ["queued", "started", "sentence", "sentence", "finished"], steps
    started = published[1]
    assert started.sentence and started.sentence.n == 1 and started.sentence.of == 3
    assert started.created_at < voice.heard[-1][1]  # on air before the last sentence's audio existed
    # Back to back by the server's clock: each sentence starts where the one before ends (or later, never sooner).
    clips = [e.sentence for e in published if e.sentence is not None]
    for before, after in zip(clips, clips[1:], strict=False):
        assert after.offset_ms >= before.offset_ms + before.audio_ms
    final = published[-1]
    assert final.audio_ms == pytest.approx(sum(c.audio_ms for c in clips), abs=3)
    assert final.ends_at == final.started_at + timedelta(milliseconds=clips[-1].offset_ms + clips[-1].audio_ms)
    assert final.audio_url and final.audio_url.endswith(".wav") and final.audio_url != started.audio_url
