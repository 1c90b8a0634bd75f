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


def test_samples_beyond_the_16_bit_range_are_scaled_down_as_a_whole_never_clipped_or_wrapped() -> None:
    audio = Audio.from_samples(np.array([40_000.0, -20_000.0, 0.4]), 8_000, voice="v")
    with wave.open(io.BytesIO(audio.wav)) as wav:
        assert struct.unpack("<3h", wav.readframes(3)) == (32767, round(-20_000 * 32767 / 40_000), 0)


@pytest.mark.parametrize(
    ("width", "encoding", "dtype", "scale"),
    [(2, 1, "<i2", 32768), (4, 1, "<i4", 2**31), (4, 3, "<f4", 1.0), (8, 3, "<f8", 1.0), (1, 1, "u1", 128)],
)
def test_samples_are_read_back_from_integer_and_float_wavs_of_any_channels(
    width: int, encoding: int, dtype: str, scale: float
) -> None:
    rng = np.random.default_rng(7)
    wanted = rng.uniform(-0.9, 0.9, size=(300, 2))
    ints = wanted * scale + (128 if dtype == "u1" else 0)
    data = (ints if encoding == 3 else np.rint(ints)).astype(dtype).tobytes()
    header = struct.pack("<HHIIHH", encoding, 2, 16_000, 16_000 * 2 * width, 2 * width, 8 * width)
    wav = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<I", 16) + header
    wav += b"data" + struct.pack("<I", len(data)) + data
    samples, rate = Audio.from_wav(wav, voice="v").samples()
    assert rate == 16_000 and samples.shape == (300, 2)
    assert np.max(np.abs(samples - wanted)) < 2 / scale + 1e-6


def test_a_24_bit_wav_is_read_with_its_sign() -> None:
    values = [0, 2**23 - 1, -(2**23), -1, 4_194_304]
    data = b"".join(v.to_bytes(3, "little", signed=True) for v in values)
    header = struct.pack("<HHIIHH", 1, 1, 8_000, 24_000, 3, 24)
    wav = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<I", 16) + header
    wav += b"data" + struct.pack("<I", len(data)) + data
    samples, _ = Audio.from_wav(wav, voice="v").samples()
    assert samples[:, 0].tolist() == [v / 2**23 for v in values]


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
