"""Broadcast-clean audio: every clip the stage airs at one loudness, under the ceiling, never clipped.

Clips are made by the real voices (Open JTalk, eSpeak NG, a VOICEVOX engine on the
same wire format) through the real Synthesizer, and measured on the WAV bytes with
the stdlib's wave reader and pyloudnorm, independently of the code under test.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pyloudnorm
import pytest

from kotae.knowledge.records import load_records
from kotae.services.onair.speech import Audio, Synthesizer, speech_text
from kotae.services.onair.speech.loudness import LoudnessTarget, broadcast_clean, measure
from kotae.services.onair.speech.offline import OfflineVoice
from kotae.services.onair.speech.voicevox import VoicevoxVoice
from kotae.settings import Settings
from tests.fakes.voicevox_server import FakeVoicevox

ROOT = Path(__file__).resolve().parents[4]
SAMPLE_KB = ROOT / "kotae" / "samples" / "kb"
CEILING_DBFS = -1.0


def played(wav: bytes) -> tuple[np.ndarray, int]:
    """The 16-bit samples a player would play, read with the stdlib (mono)."""
    with wave.open(io.BytesIO(wav)) as source:
        assert source.getsampwidth() == 2 and source.getnchannels() == 1
        frames = source.readframes(source.getnframes())
        return np.frombuffer(frames, dtype="<i2").astype(np.int32), source.getframerate()


def lufs(wav: bytes) -> float:
    samples, rate = played(wav)
    return float(pyloudnorm.Meter(rate).integrated_loudness(samples / 32768.0))


def peak_dbfs(wav: bytes) -> float:
    samples, _ = played(wav)
    return float(20 * np.log10(np.max(np.abs(samples)) / 32768.0))


def clipped(wav: bytes) -> int:
    samples, _ = played(wav)
    return int(np.count_nonzero((samples >= 32767) | (samples <= -32768)))


def sample_sentences() -> list[tuple[str, str]]:
    """(lang, speech text): the first sentence of every document and FAQ answer of the bundled sample."""
    said = []
    for record in load_records(SAMPLE_KB):
        text = record.text or record.answer or ""
        first = re.split(r"(?<=[。!?])|(?<=[.!?])\s+|\n+", text.strip())[0]
        said.append((record.language, speech_text(first, record.language)))
    return said


async def test_every_clip_of_the_sample_is_at_the_target_loudness_under_the_ceiling_and_never_clipped(
    offline_voice: OfflineVoice,
) -> None:
    speech = Synthesizer(offline_voice, retries=0, timeout_s=120)
    said = sample_sentences()
    assert len(said) >= 20 and {lang for lang, _ in said} == {"ja", "en"}
    for n, (lang, text) in enumerate(said):
        await speech.prepare(n, text, lang)  # type: ignore[arg-type]
    clips = [await speech.get(n) for n in range(len(said))]
    await speech.aclose()
    first = {lang: text for lang, text in reversed(said)}
    raw = {lang: lufs((await offline_voice.synthesize(text, lang)).wav) for lang, text in first.items()}  # type: ignore[arg-type]
    assert abs(raw["ja"] - raw["en"]) > 1  # as the engines speak, one is louder than the other

    for (_, text), audio in zip(said, clips, strict=True):
        assert peak_dbfs(audio.wav) <= CEILING_DBFS, text
        assert clipped(audio.wav) == 0, text
        assert abs(lufs(audio.wav) - (-16.0)) <= 1.0, text
    voices = {audio.voice for audio in clips}
    assert voices == {"openjtalk:mei", "espeak-ng:en-us"}
    by_voice = {v: [lufs(a.wav) for a in clips if a.voice == v] for v in voices}
    # The two engines now sound equally loud.
    assert abs(np.median(by_voice["openjtalk:mei"]) - np.median(by_voice["espeak-ng:en-us"])) < 0.5


@pytest.mark.skipif(shutil.which("sox") is None, reason="sox is not installed")
async def test_sox_finds_no_peak_above_the_ceiling_in_an_aired_clip(
    offline_voice: OfflineVoice, tmp_path: Path
) -> None:
    speech = Synthesizer(offline_voice, retries=0, timeout_s=120)
    await speech.prepare("c", speech_text("期日前投票は1/10から1/23まで、市役所で8:30〜20:00です。", "ja"), "ja")
    path = tmp_path / "clip.wav"
    path.write_bytes((await speech.get("c")).wav)
    await speech.aclose()
    stats = subprocess.run(["sox", str(path), "-n", "stats"], capture_output=True, text=True, check=True).stderr
    level = float(re.search(r"Pk lev dB\s+(-?[\d.]+)", stats).group(1))  # type: ignore[union-attr]
    assert level <= CEILING_DBFS


async def test_a_voicevox_speaker_and_the_offline_voices_air_at_one_loudness(offline_voice: OfflineVoice) -> None:
    with FakeVoicevox() as engine:
        engine_voice = VoicevoxVoice(engine.url, 3)
        aired = []
        for voice, lang, text in (
            (engine_voice, "ja", "投票日は四月二十五日です。"),
            (offline_voice, "ja", "投票日は四月二十五日です。"),
            (offline_voice, "en", "The polls open at seven in the morning."),
        ):
            speech = Synthesizer(voice, retries=0, timeout_s=60)  # type: ignore[arg-type]
            await speech.prepare("c", text, lang)  # type: ignore[arg-type]
            aired.append(await speech.get("c"))
            await speech.aclose()
        await engine_voice.aclose()
    levels = [lufs(audio.wav) for audio in aired]
    assert max(levels) - min(levels) < 0.5 and all(abs(level + 16) < 0.5 for level in levels)
    assert all(peak_dbfs(audio.wav) <= CEILING_DBFS for audio in aired)


async def test_the_target_and_the_ceiling_are_settings(offline_voice: OfflineVoice) -> None:
    settings = Settings(onair_loudness_lufs=-23.0, onair_peak_dbtp=-3.0)  # type: ignore[call-arg]
    speech = Synthesizer.from_settings(offline_voice, settings)
    await speech.prepare("c", "運賃は大人百五十円、子どもは八十円です。", "ja")
    audio = await speech.get("c")
    await speech.aclose()
    assert abs(lufs(audio.wav) + 23) < 0.5 and peak_dbfs(audio.wav) <= -3.0


def tone(seconds: float, amplitude: float, rate: int = 24_000, hz: float = 440.0) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * hz * np.arange(int(rate * seconds)) / rate)


def test_a_clip_shorter_than_one_loudness_block_is_still_brought_to_the_target() -> None:
    short = Audio.from_float(tone(0.25, 0.05), 24_000, voice="v")
    clean = broadcast_clean(short, LoudnessTarget())
    assert abs(measure(clean).lufs + 16) < 0.5 and clean.duration_ms == short.duration_ms == 250


def test_silence_stays_silent() -> None:
    silent = Audio.from_float(np.zeros(24_000), 24_000, voice="v")
    assert not played(broadcast_clean(silent, LoudnessTarget()).wav)[0].any()


def test_where_reaching_the_target_would_take_more_limiting_than_allowed_the_ceiling_wins() -> None:
    """A faint tone with loud clicks: the clicks would need ~20 dB of limiting; it stays quieter instead."""
    samples = tone(3.0, 0.01)
    samples[::4_800] = 0.9
    clean = broadcast_clean(Audio.from_float(samples, 24_000, voice="v"), LoudnessTarget())
    level = measure(clean)
    assert level.lufs < -20 and level.true_peak_db <= -1.0 + 1e-6 and level.clipped == 0
    assert level.true_peak_db > -1.0 - 6.0 - 0.5  # limited by at most max_limiting_db, not just turned down


def test_a_stereo_float_wav_from_elsewhere_is_read_and_comes_out_clean() -> None:
    stereo = np.stack([tone(2.0, 1.4), tone(2.0, 0.7, hz=300)], axis=1)  # beyond full scale on the left
    loud = Audio.from_float(stereo, 24_000, voice="v")
    clean = broadcast_clean(loud, LoudnessTarget())
    level = measure(clean)
    assert abs(level.lufs + 16) < 0.5 and level.true_peak_db <= -1.0 + 1e-6 and level.clipped == 0
    assert clean.samples()[0].shape == (48_000, 2)
