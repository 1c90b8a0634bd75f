"""Synthesised speech as one RIFF/WAV file, and its length in milliseconds."""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass, field
from typing import Any

#: The largest magnitude a 16-bit sample holds, on the ±1.0 scale.
_INT16_FULL_SCALE = 32767 / 32768


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
        """Mono samples (floats on the int16 scale, as Open JTalk gives, or int16) as a 16-bit WAV.

        Floats beyond the 16-bit range are scaled down as a whole, never clipped.
        """
        import numpy as np

        values = np.asarray(samples)
        if values.ndim != 1:
            raise ValueError(f"expected mono samples (one dimension), got shape {values.shape}")
        return cls.from_float(values.astype(np.float64) / 32768.0, sample_rate, voice=voice)

    @classmethod
    def from_float(cls, samples: Any, sample_rate: int, *, voice: str) -> Audio:
        """Samples on the ±1.0 scale, shaped (frames,) or (frames, channels), as a 16-bit PCM WAV.

        A clip whose peak is beyond full scale is scaled down as a whole: a clipped
        sample is audible distortion on stream, a dB quieter is not.
        """
        import numpy as np

        values = np.asarray(samples, dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim != 2 or values.shape[1] < 1:
            raise ValueError(f"expected samples shaped (frames,) or (frames, channels), got {values.shape}")
        peak = float(np.max(np.abs(values), initial=0.0))
        if peak > _INT16_FULL_SCALE:
            values = values * (_INT16_FULL_SCALE / peak)
        pcm = np.rint(values * 32768.0).clip(-32768, 32767).astype("<i2")
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(values.shape[1])
            out.setsampwidth(2)
            out.setframerate(int(sample_rate))
            out.writeframes(pcm.tobytes())
        return cls(wav=buffer.getvalue(), duration_ms=round(len(pcm) * 1000 / sample_rate), voice=voice)

    def samples(self) -> tuple[Any, int]:
        """The audio as float samples on the ±1.0 scale, shaped (frames, channels), and its sample rate.

        Reads 8-, 16-, 24- and 32-bit PCM and 32/64-bit float, streamed WAVs too;
        raises :class:`NotWav` for anything else.
        """
        return wav_samples(self.wav)


@dataclass(frozen=True)
class _Layout:
    """Where a WAV's samples are and how they are written."""

    encoding: int  # 1 integer PCM, 3 IEEE float
    channels: int
    rate: int
    bits: int
    block_align: int
    data: int  # offset of the first frame
    frames: int


def wav_duration_ms(wav: bytes) -> int:
    """The playing time of a PCM RIFF/WAV file (raises :class:`NotWav`).

    Read from the ``fmt `` chunk and the bytes the ``data`` chunk really holds:
    a streamed WAV (OpenAI's speech endpoint sends one) declares its sizes as
    0xFFFFFFFF because they were not known when the header went out.
    """
    layout = _layout(wav)
    return round(layout.frames * 1000 / layout.rate)


def wav_samples(wav: bytes) -> tuple[Any, int]:
    """A PCM or float RIFF/WAV file's samples on the ±1.0 scale, shaped (frames, channels), and its rate."""
    import numpy as np

    layout = _layout(wav)
    raw = wav[layout.data : layout.data + layout.frames * layout.block_align]
    width = layout.block_align // layout.channels
    if layout.encoding == 3 and width in (4, 8):
        values = np.frombuffer(raw, dtype=f"<f{width}").astype(np.float64)
    elif layout.encoding == 1 and width == 1:
        values = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0) / 128.0
    elif layout.encoding == 1 and width in (2, 4):
        values = np.frombuffer(raw, dtype=f"<i{width}").astype(np.float64) / 2.0 ** (8 * width - 1)
    elif layout.encoding == 1 and width == 3:
        bytes3 = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = bytes3[:, 0] | (bytes3[:, 1] << 8) | (bytes3[:, 2] << 16)
        values = np.where(ints >= 1 << 23, ints - (1 << 24), ints).astype(np.float64) / 2.0**23
    else:
        kind = "float" if layout.encoding == 3 else "PCM"
        raise NotWav(f"WAV of {width * 8}-bit {kind} samples: not a sample format kotae reads")
    return values.reshape(layout.frames, layout.channels), layout.rate


def _layout(wav: bytes) -> _Layout:
    if len(wav) < 12 or wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise NotWav(f"not a RIFF/WAVE file ({len(wav)} bytes, starting {wav[:12]!r})")
    fmt: tuple[int, int, int, int, int] | None = None
    offset = 12
    while offset + 8 <= len(wav):
        chunk, size = wav[offset : offset + 4], struct.unpack_from("<I", wav, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt " and size >= 16 and body + 16 <= len(wav):
            fmt = _format(wav, body, size)
        elif chunk == b"data":
            if fmt is None:
                raise NotWav("WAV whose data chunk comes before its fmt chunk")
            encoding, channels, rate, block_align, bits = fmt
            frames = min(size, len(wav) - body) // block_align
            if frames <= 0:
                raise NotWav("WAV without any audio frames")
            return _Layout(encoding, channels, rate, bits, block_align, body, frames)
        offset = body + size + (size & 1)  # chunks are padded to an even length
    raise NotWav("WAV without a fmt and a data chunk")


def _format(wav: bytes, body: int, size: int) -> tuple[int, int, int, int, int]:
    """(encoding, channels, rate, block_align, bits) of a ``fmt `` chunk; extensible WAVs by their sub-format."""
    encoding, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", wav, body)
    if encoding == 0xFFFE and size >= 40 and body + 26 <= len(wav):
        encoding = struct.unpack_from("<H", wav, body + 24)[0]  # the first two bytes of the sub-format GUID
    if encoding not in (1, 3):  # PCM, IEEE float
        raise NotWav(f"WAV in format {encoding:#x}, not PCM")
    if channels < 1 or rate <= 0 or block_align <= 0:
        raise NotWav(f"WAV header with {channels} channels at {rate} Hz, {block_align} bytes a frame")
    return encoding, channels, rate, block_align, bits
