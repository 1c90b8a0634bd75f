"""Audio: WAV files made from samples, and the duration of WAV files other programs wrote."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from kotae.services.onair.speech.audio import Audio, NotWav, wav_duration_ms
from tests.fakes.wav import streamed, tone_wav


def test_samples_become_a_mono_16_bit_wav_as_long_as_they_play() -> None:
    samples = np.sin(np.linspace(0, 400, 48_000 * 3 // 2)) * 12_000.0  # 1.5 s of float samples at 48 kHz
    audio = Audio.from_samples(samples, 48_000, voice="openjtalk:mei")
    with wave.open(io.BytesIO(audio.wav)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 48_000)
        assert wav.getnframes() == len(samples)
    assert audio.duration_ms == 1500 and audio.voice == "openjtalk:mei"


def test_samples_beyond_the_16_bit_range_are_clipped_not_wrapped() -> None:
    audio = Audio.from_samples(np.array([40_000.0, -40_000.0, 0.4]), 8_000, voice="v")
    with wave.open(io.BytesIO(audio.wav)) as wav:
        assert struct.unpack("<3h", wav.readframes(3)) == (32767, -32768, 0)


def test_stereo_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="mono"):
        Audio.from_samples(np.zeros((10, 2)), 8_000, voice="v")


def test_a_wav_from_elsewhere_keeps_its_bytes_and_gets_its_duration_from_the_header() -> None:
    wav = tone_wav(2_340, rate=24_000)
    audio = Audio.from_wav(wav, voice="voicevox:3")
    assert audio.wav == wav and audio.duration_ms == 2_340


def test_a_streamed_wav_with_unknown_sizes_is_measured_by_the_bytes_it_holds() -> None:
    """OpenAI's speech endpoint writes 0xFFFFFFFF as the sizes; the stdlib's wave would say 24 hours."""
    assert wav_duration_ms(streamed(tone_wav(1_200))) == 1_200


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "not a RIFF/WAVE"),
        (b"<html>bad gateway</html>", "not a RIFF/WAVE"),
        (tone_wav(500)[:44], "without any audio"),
        (tone_wav(500)[:12], "without a fmt and a data chunk"),
        (tone_wav(500)[:20] + struct.pack("<H", 0x55) + tone_wav(500)[22:], "not PCM"),  # MP3 inside RIFF
    ],
)
def test_what_is_not_a_playable_wav_says_why(data: bytes, reason: str) -> None:
    with pytest.raises(NotWav, match=reason):
        Audio.from_wav(data, voice="v")
