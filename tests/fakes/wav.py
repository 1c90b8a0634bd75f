"""Real WAV files for the fake speech servers: a tone as long as the text would take to say."""

from __future__ import annotations

import io
import math
import struct
import wave

MS_PER_CHARACTER = 90  # about how fast a voice reads Japanese


def tone_wav(duration_ms: int, *, rate: int = 24_000, hz: float = 220.0) -> bytes:
    """A mono 16-bit PCM RIFF/WAV of a sine tone lasting ``duration_ms``."""
    frames = rate * duration_ms // 1000
    samples = (int(8000 * math.sin(2 * math.pi * hz * i / rate)) for i in range(frames))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(struct.pack(f"<{frames}h", *samples))
    return buffer.getvalue()


def spoken_wav(text: str, *, rate: int = 24_000) -> bytes:
    """What a voice would return for ``text``: a tone of ``MS_PER_CHARACTER`` a character."""
    return tone_wav(max(1, len(text)) * MS_PER_CHARACTER, rate=rate)


def streamed(wav: bytes) -> bytes:
    """``wav`` with the sizes a streaming server writes before it knows them (0xFFFFFFFF)."""
    return wav[:4] + b"\xff\xff\xff\xff" + wav[8:40] + b"\xff\xff\xff\xff" + wav[44:]
