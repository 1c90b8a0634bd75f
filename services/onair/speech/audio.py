"""Synthesised speech as one RIFF/WAV file, and its length in milliseconds."""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass, field
from typing import Any


class NotWav(ValueError):
    """Bytes that are not a playable PCM RIFF/WAV file."""


@dataclass(frozen=True)
class Audio:
    """One spoken answer: a mono RIFF/WAV file, how long it plays, and the voice that spoke it.

    ``voice`` names the engine and its voice (``openjtalk:mei``, ``espeak-ng:en-us``,
    ``voicevox:3``, ``openai:tts-1|alloy``), so what aired says who spoke it.

    Example::

        audio = Audio.from_wav(wav_bytes, voice="voicevox:3")
        audio.duration_ms  # from the header: frames ÷ frame rate
    """

    wav: bytes = field(repr=False)  # hundreds of kilobytes: not for a log line
    duration_ms: int
    voice: str

    @classmethod
    def from_wav(cls, wav: bytes, *, voice: str) -> Audio:
        """The audio in a WAV file another program wrote, its duration read from its header.

        A stereo file is accepted as it is (its duration is still right); anything
        that is not PCM RIFF/WAV raises :class:`NotWav` with what was wrong.
        """
        return cls(wav=wav, duration_ms=wav_duration_ms(wav), voice=voice)

    @classmethod
    def from_samples(cls, samples: Any, sample_rate: int, *, voice: str) -> Audio:
        """Mono samples (floats on the int16 scale, as Open JTalk gives, or int16) as a 16-bit WAV."""
        pcm = _int16_pcm(samples)
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(int(sample_rate))
            out.writeframes(pcm)
        frames = len(pcm) // 2
        return cls(wav=buffer.getvalue(), duration_ms=round(frames * 1000 / sample_rate), voice=voice)


def wav_duration_ms(wav: bytes) -> int:
    """The playing time of a PCM RIFF/WAV file (raises :class:`NotWav`).

    Read from the ``fmt `` chunk and the bytes the ``data`` chunk really holds:
    a streamed WAV (OpenAI's speech endpoint sends one) declares its sizes as
    0xFFFFFFFF because they were not known when the header went out.
    """
    if len(wav) < 12 or wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise NotWav(f"not a RIFF/WAVE file ({len(wav)} bytes, starting {wav[:12]!r})")
    block_align = rate = None
    offset = 12
    while offset + 8 <= len(wav):
        chunk, size = wav[offset : offset + 4], struct.unpack_from("<I", wav, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt " and size >= 16 and body + 16 <= len(wav):
            fmt, channels, rate, _byte_rate, block_align = struct.unpack_from("<HHIIH", wav, body)
            if fmt not in (1, 3, 0xFFFE):  # PCM, IEEE float, extensible
                raise NotWav(f"WAV in format {fmt:#x}, not PCM")
            if channels < 1 or rate <= 0 or block_align <= 0:
                raise NotWav(f"WAV header with {channels} channels at {rate} Hz, {block_align} bytes a frame")
        elif chunk == b"data":
            if rate is None or block_align is None:
                raise NotWav("WAV whose data chunk comes before its fmt chunk")
            frames = min(size, len(wav) - body) // block_align
            if frames <= 0:
                raise NotWav("WAV without any audio frames")
            return round(frames * 1000 / rate)
        offset = body + size + (size & 1)  # chunks are padded to an even length
    raise NotWav("WAV without a fmt and a data chunk")


def _int16_pcm(samples: Any) -> bytes:
    import numpy as np

    values = np.asarray(samples)
    if values.ndim != 1:
        raise ValueError(f"expected mono samples (one dimension), got shape {values.shape}")
    if values.dtype != np.int16:
        values = np.clip(np.rint(values), -32768, 32767).astype("<i2")
    return values.astype("<i2", copy=False).tobytes()
