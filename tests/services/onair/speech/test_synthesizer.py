"""Synthesis ahead of its turn: retries, a timeout per call, bounded work, and no key waiting on another's voice.

Real voices throughout: the offline one, and a local VOICEVOX engine that can
fail, hang (never answer) or answer slowly.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kotae.services.onair.speech import Synthesizer, VoiceFailed, speech_text
from kotae.services.onair.speech.offline import OfflineVoice
from kotae.services.onair.speech.voicevox import VoicevoxVoice
from tests.fakes.voicevox_server import FakeVoicevox


class _Slow:
    """A responder that holds each /synthesis back and counts how many are in flight at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.in_flight = 0
        self.most = 0
        self.order: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, path: str, text: str) -> str | None:
        if path != "/synthesis":
            return None
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.order.append(text)
        time.sleep(self.seconds)
        with self._lock:
            self.in_flight -= 1
        return None


async def test_an_answer_prepared_ahead_is_there_when_its_turn_comes(offline_voice: OfflineVoice) -> None:
    speech = Synthesizer(offline_voice, retries=1, timeout_s=60)
    await speech.prepare("c-1", speech_text("投票日は4/25(日)です[1]。", "ja"), "ja")
    await speech.prepare("c-2", speech_text("Polls open at 7:00 [1].", "en"), "en")
    first, second = await speech.get("c-1"), await speech.get("c-2")
    assert (first.voice, second.voice) == ("openjtalk:mei", "espeak-ng:en-us")
    assert speech.ready("c-1") and await speech.get("c-1") is first  # kept until forgotten
    speech.forget("c-1")
    assert "c-1" not in speech and "c-2" in speech
    with pytest.raises(KeyError):
        await speech.get("c-1")
    await speech.aclose()


async def test_a_voice_that_never_answers_fails_after_its_retries_and_holds_up_no_other_key() -> None:
    with FakeVoicevox(responder=lambda path, text: "hang" if "止" in text else None) as engine:
        speech = Synthesizer(VoicevoxVoice(engine.url, 1), retries=2, timeout_s=0.4, concurrency=1, backoff_s=0.05)
        await speech.prepare("stuck", "止まる。", "ja")
        await speech.prepare("next", "次の答えです。", "ja")
        started = time.perf_counter()
        audio = await speech.get("next")  # its turn came while "stuck" holds the one pre-synthesis lane
        next_took = time.perf_counter() - started
        assert audio.duration_ms > 0 and not speech.ready("stuck")
        with pytest.raises(VoiceFailed) as failed:
            await speech.get("stuck")
        stuck_took = time.perf_counter() - started
        await speech.aclose()
    assert "no audio within 0.4s (3 attempts)" in failed.value.reason
    assert len([r for r in engine.requests if r["query"].get("text") == "止まる。"]) == 3
    assert next_took < stuck_took / 3


async def test_a_voice_that_errors_fails_with_its_reason_after_the_retries(voicevox: FakeVoicevox) -> None:
    voicevox.default = "500"
    speech = Synthesizer(VoicevoxVoice(voicevox.url, 1), retries=2, timeout_s=5, backoff_s=0.01)
    await speech.prepare("c-1", "こんにちは。", "ja")
    with pytest.raises(VoiceFailed) as failed:
        await speech.get("c-1")
    assert "HTTP 500" in failed.value.reason and "(3 attempts)" in failed.value.reason
    assert len(voicevox.requests) == 3
    await speech.aclose()


async def test_a_voice_that_fails_once_is_retried_and_speaks(voicevox: FakeVoicevox) -> None:
    voicevox.script.append("500")
    speech = Synthesizer(VoicevoxVoice(voicevox.url, 1), retries=2, timeout_s=5, backoff_s=0.01)
    await speech.prepare("c-1", "こんにちは。", "ja")
    assert (await speech.get("c-1")).duration_ms > 0
    assert [r["path"] for r in voicevox.requests] == ["/audio_query", "/audio_query", "/synthesis"]
    await speech.aclose()


async def test_a_failure_retrying_cannot_mend_is_not_retried(voicevox: FakeVoicevox) -> None:
    speech = Synthesizer(VoicevoxVoice(voicevox.url, 42), retries=3, timeout_s=5, backoff_s=0.01)
    await speech.prepare("c-1", "こんにちは。", "ja")
    with pytest.raises(VoiceFailed, match=r"HTTP 422.*\(1 attempt\)"):
        await speech.get("c-1")
    assert len(voicevox.requests) == 1
    await speech.aclose()


async def _started(slow: _Slow, text: str) -> None:
    """Wait until `text` reached the engine: a fixed sleep loses the race on a loaded machine."""
    async with asyncio.timeout(10):
        while text not in slow.order:
            await asyncio.sleep(0.005)


async def test_pre_synthesis_runs_at_most_concurrency_at_once() -> None:
    slow = _Slow(0.15)
    with FakeVoicevox(responder=slow) as engine:
        speech = Synthesizer(VoicevoxVoice(engine.url, 1), concurrency=2, timeout_s=10)
        for i in range(6):
            await speech.prepare(i, f"答え{i}。", "ja")
        while not all(speech.ready(i) for i in range(6)):
            await asyncio.sleep(0.02)
        await speech.aclose()
    # In the order asked, up to the race between two requests that set off together.
    asked = [f"答え{i}。" for i in range(6)]
    assert slow.most == 2 and sorted(slow.order) == asked, slow.order
    assert all(abs(slow.order.index(text) - i) < 2 for i, text in enumerate(asked)), slow.order


async def test_the_answer_whose_turn_came_goes_before_those_prepared_ahead() -> None:
    slow = _Slow(0.3)  # long enough that 1 cannot start before get(4) is seen
    with FakeVoicevox(responder=slow) as engine:
        speech = Synthesizer(VoicevoxVoice(engine.url, 1), concurrency=1, timeout_s=10)
        for i in range(5):
            await speech.prepare(i, f"答え{i}。", "ja")
        await _started(slow, "答え0。")  # 0 holds the one lane; 1–4 wait
        await speech.get(4)
        await speech.aclose()
    assert slow.order[:2] == ["答え0。", "答え4。"]


async def test_forgetting_a_waiting_key_lets_the_next_one_start() -> None:
    slow = _Slow(0.1)
    with FakeVoicevox(responder=slow) as engine:
        speech = Synthesizer(VoicevoxVoice(engine.url, 1), concurrency=1, timeout_s=10)
        for i in range(3):
            await speech.prepare(i, f"答え{i}。", "ja")
        await _started(slow, "答え0。")
        speech.forget(1)  # first in line after 0
        assert (await asyncio.wait_for(speech.get(2), 5)).duration_ms > 0
        await speech.aclose()
    assert "答え1。" not in slow.order


def test_settings_give_the_retries_the_timeout_and_the_lanes(tmp_path: object) -> None:
    from kotae.settings import load_settings

    settings = load_settings(onair_voice_retries=4, onair_voice_timeout_s=9, onair_voice_concurrency=2)
    speech = Synthesizer.from_settings(OfflineVoice.__new__(OfflineVoice), settings)
    assert (speech.retries, speech.timeout_s, speech.concurrency) == (4, 9, 2)
