"""The offline voice speaks for real: Open JTalk's mei in Japanese, eSpeak NG in English, off the event loop."""

from __future__ import annotations

import asyncio
import io
import sys
import time
import wave

import numpy as np
import pytest

from kotae.services.onair.speech import VoiceFailed, VoiceUnavailable, speech_text
from kotae.services.onair.speech.espeak import EspeakEngine, find_espeak
from kotae.services.onair.speech.offline import OfflineVoice
from kotae.services.onair.speech.openjtalk import check_openjtalk


def _loudness(wav: bytes) -> float:
    with wave.open(io.BytesIO(wav)) as source:
        samples = np.frombuffer(source.readframes(source.getnframes()), dtype="<i2").astype(float)
    return float(np.sqrt(np.mean(samples**2)))


def _rate(wav: bytes) -> int:
    with wave.open(io.BytesIO(wav)) as source:
        assert source.getnchannels() == 1
        return source.getframerate()


async def test_a_japanese_answer_is_spoken_by_open_jtalk_mei(offline_voice: OfflineVoice) -> None:
    audio = await offline_voice.synthesize(speech_text("投票日は2027年4月25日(日)です[1]。", "ja"), "ja")
    assert audio.voice == "openjtalk:mei" and _rate(audio.wav) == 48_000
    assert 1_500 < audio.duration_ms < 8_000
    assert _loudness(audio.wav) > 300  # speech, not silence


async def test_an_english_answer_is_spoken_by_espeak_ng(offline_voice: OfflineVoice) -> None:
    audio = await offline_voice.synthesize(speech_text("Polls open at 7:00 a.m. on 25 April [2].", "en"), "en")
    assert audio.voice == "espeak-ng:en-us" and _rate(audio.wav) == 22_050
    assert 1_500 < audio.duration_ms < 8_000
    assert _loudness(audio.wav) > 300


async def test_a_longer_answer_takes_longer_to_say(offline_voice: OfflineVoice) -> None:
    short = await offline_voice.synthesize("運賃は百五十円です。", "ja")
    long = await offline_voice.synthesize("運賃は百五十円です。" * 4, "ja")
    assert long.duration_ms > 3 * short.duration_ms
    short_en = await offline_voice.synthesize("The fare is low.", "en")
    long_en = await offline_voice.synthesize("The fare is low. " * 4, "en")
    assert long_en.duration_ms > 3 * short_en.duration_ms


async def test_synthesis_runs_off_the_event_loop(offline_voice: OfflineVoice) -> None:
    """While a long answer is synthesised, the loop keeps ticking: no gap near the synthesis time."""
    await offline_voice.synthesize("準備。", "ja")  # the dictionary is loaded before we measure
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    started = time.perf_counter()
    await offline_voice.synthesize("新しい路線は、二千二十七年十月に開設します。" * 6, "ja")
    took = time.perf_counter() - started
    done.set()
    await ticker
    assert len(gaps) > 5 and max(gaps) < took / 3


async def test_nothing_to_say_is_a_failure_not_worth_retrying(offline_voice: OfflineVoice) -> None:
    for lang in ("ja", "en"):
        with pytest.raises(VoiceFailed) as failed:
            await offline_voice.synthesize("  ", lang)  # type: ignore[arg-type]
        assert not failed.value.retryable and "nothing to say" in failed.value.reason


async def test_an_english_voice_espeak_does_not_have_is_a_reason() -> None:
    with pytest.raises(VoiceFailed, match="no voice 'xx-nowhere'"):
        EspeakEngine("xx-nowhere").speak("Hello.")


def test_the_english_voice_comes_from_the_wheel() -> None:
    found = find_espeak()
    assert found.source == "espeakng-loader wheel" and found.data and found.library.endswith(".so")


def test_without_the_wheel_or_a_system_library_the_voice_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no libespeak-ng of its own: hiding the wheel leaves nothing, and it says what to install."""
    import ctypes.util

    if ctypes.util.find_library("espeak-ng"):
        pytest.skip("this machine has a system libespeak-ng, which the voice would use")
    monkeypatch.setitem(sys.modules, "espeakng_loader", None)  # import espeakng_loader now fails
    with pytest.raises(VoiceUnavailable, match="espeakng-loader"):
        OfflineVoice()


def test_without_pyopenjtalk_the_voice_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopenjtalk", None)
    with pytest.raises(VoiceUnavailable, match="pyopenjtalk-plus"):
        check_openjtalk()
