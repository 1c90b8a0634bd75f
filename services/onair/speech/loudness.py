"""Broadcast-clean audio: every clip at one loudness, under one true-peak ceiling, never clipped.

Each engine speaks at its own level (Open JTalk's mei peaks past full scale,
eSpeak NG sits ~4 LU lower, a VOICEVOX speaker or an OpenAI voice somewhere
else), so without this the stream's level jumps from answer to answer and
engine to engine. :func:`broadcast_clean` brings every clip to an integrated
loudness of ``KOTAE_ONAIR_LOUDNESS_LUFS`` (ITU-R BS.1770-4 as EBU R 128 uses
it, measured by pyloudnorm) with no peak above ``KOTAE_ONAIR_PEAK_DBTP``.

Speech peaks 16–19 dB above its loudness, more than the 15 dB between −16 LUFS
and −1 dBTP; a plain gain would leave every clip below the target by a
different amount. A look-ahead limiter therefore takes the few peaks above the
ceiling down (a few dB, for a few milliseconds each: inaudible on speech), and
the gain is found again after it. Where a clip would need more than
``max_limiting_db`` of limiting, the ceiling wins and the clip stays quieter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .audio import Audio

_OVERSAMPLING = 4  # BS.1770-4 Annex 2: a 4× oversampled peak is the true peak of a 48 kHz signal
_RAMP_S = 0.0025  # the limiter's gain glides down (and up) over 2 × 2.5 ms: no click
_HOLD_S = 0.010  # and holds for 10 ms around a peak, so it does not flutter on a vowel's cycles
_FULL_SCALE_INT16 = 32767 / 32768
_ROUNDING_DB = 0.01  # room under the ceiling for rounding to 16 bits (half a step is ~0.0003 dB at -1 dBFS)


@dataclass(frozen=True)
class LoudnessTarget:
    """Where every clip goes: integrated loudness (LUFS), a true-peak ceiling (dBTP), limiting allowed (dB).

    Example::

        LoudnessTarget()                      # −16 LUFS, −1 dBTP: streaming speech (EBU R 128 s1, AES TD1004)
        LoudnessTarget(lufs=-14.0)            # YouTube's playback reference
    """

    lufs: float = -16.0
    ceiling_dbtp: float = -1.0
    max_limiting_db: float = 6.0

    def __post_init__(self) -> None:
        if not (-40.0 <= self.lufs <= -5.0):
            raise ValueError(f"loudness target {self.lufs} LUFS: expected between -40 and -5")
        if not (-12.0 <= self.ceiling_dbtp <= 0.0):
            raise ValueError(f"peak ceiling {self.ceiling_dbtp} dBTP: expected between -12 and 0")
        if self.max_limiting_db < 0:
            raise ValueError(f"max_limiting_db {self.max_limiting_db}: expected >= 0")


@dataclass(frozen=True)
class Loudness:
    """What a clip measures: integrated loudness, true and sample peak, and samples at full scale.

    ``lufs`` is ``-inf`` for silence; a sample is counted clipped when its 16-bit value is at ±full scale.
    """

    lufs: float
    true_peak_db: float
    sample_peak_db: float
    clipped: int


def measure(audio: Audio) -> Loudness:
    """The loudness, peaks and clipped samples of ``audio`` as it would play.

    Example::

        measure(audio)  # Loudness(lufs=-16.0, true_peak_db=-1.2, sample_peak_db=-1.5, clipped=0)
    """
    import numpy as np

    samples, rate = audio.samples()
    peak = float(np.max(np.abs(samples), initial=0.0))
    return Loudness(
        lufs=_integrated(samples, rate),
        true_peak_db=_db(float(np.max(_true_peaks(samples), initial=0.0))),
        sample_peak_db=_db(peak),
        clipped=int(np.count_nonzero(np.abs(samples) >= _FULL_SCALE_INT16)),
    )


def broadcast_clean(audio: Audio, target: LoudnessTarget) -> Audio:
    """``audio`` at ``target``'s loudness, no peak above its ceiling, as a 16-bit WAV of the same rate and length.

    CPU-bound (a few hundredths of the clip's length): run it off the event loop.

    Example::

        clean = broadcast_clean(audio, LoudnessTarget())
        measure(clean).lufs  # -16.0 (within 0.1 LU)
    """
    samples, rate = audio.samples()
    return Audio.from_float(_normalised(samples, rate, target), rate, voice=audio.voice)


# --- the work -------------------------------------------------------------------------


def _normalised(samples: Any, rate: int, target: LoudnessTarget) -> Any:
    import numpy as np

    ceiling = 10 ** ((target.ceiling_dbtp - _ROUNDING_DB) / 20)
    loudness = _integrated(samples, rate)
    peaks = _true_peaks(samples)  # a gain scales them: measured once
    peak_db = _db(float(np.max(peaks, initial=0.0)))
    if not math.isfinite(loudness):  # silence, or next to it: nothing to bring up
        return _under_ceiling(samples, ceiling)
    # Beyond this gain the limiter would take more than max_limiting_db off the peaks: the ceiling wins.
    most = target.ceiling_dbtp + target.max_limiting_db - peak_db
    gain_db = min(target.lufs - loudness, most)
    out = samples
    for _ in range(4):  # limiting lowers the loudness a little: measure again and make it up
        gain = 10 ** (gain_db / 20)
        out = _limited(samples * gain, peaks * gain, rate, ceiling)
        short = target.lufs - _integrated(out, rate)
        if abs(short) < 0.05 or gain_db >= most:
            break
        gain_db = min(gain_db + short, most)
    return _under_ceiling(out, ceiling)


def _integrated(samples: Any, rate: int) -> float:
    """BS.1770-4 gated integrated loudness; a clip shorter than one 400 ms block is one block of its own length."""
    import pyloudnorm

    block = min(0.4, len(samples) / rate)
    if block <= 0:
        return -math.inf
    meter = pyloudnorm.Meter(rate, block_size=block)
    return float(meter.integrated_loudness(samples))


def _true_peaks(samples: Any) -> Any:
    """Each frame's true peak: the largest magnitude of its 4× oversampled values across channels."""
    import numpy as np
    from scipy.signal import resample_poly

    frames = len(samples)
    if frames == 0:
        return np.zeros(0)
    if frames < 8:  # too short for the interpolation filter to mean anything
        return np.max(np.abs(samples), axis=1)
    up = resample_poly(samples, _OVERSAMPLING, 1, axis=0)[: frames * _OVERSAMPLING]
    return np.abs(up, out=up).reshape(frames, -1).max(axis=1)


def _limited(samples: Any, peaks: Any, rate: int, ceiling: float) -> Any:
    """A look-ahead brick-wall limiter: each frame's gain at most what keeps its true peak (``peaks``) under ``ceiling``.

    The gain each frame needs is spread as a minimum over ``hold`` frames either
    side, then smoothed twice over ``2 × ramp + 1`` frames. As the hold covers
    both smoothing windows, every smoothed gain is a mean of values each at or
    below the frame's own need: the ceiling holds for every frame.
    """
    import numpy as np
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    need = np.minimum(1.0, ceiling / np.maximum(peaks, 1e-12))
    if need.min(initial=1.0) >= 1.0:
        return samples
    ramp = max(1, round(rate * _RAMP_S))
    hold = max(2 * ramp, round(rate * _HOLD_S))
    gain = minimum_filter1d(need, 2 * hold + 1, mode="nearest")
    for _ in range(2):
        gain = uniform_filter1d(gain, 2 * ramp + 1, mode="nearest")
    return samples * gain[:, None]


def _under_ceiling(samples: Any, ceiling: float) -> Any:
    """What smoothing and interpolation left above the ceiling (a hair, if anything) taken off by one gain."""
    import numpy as np

    peak = float(np.max(_true_peaks(samples), initial=0.0))
    return samples * (ceiling / peak) if peak > ceiling else samples


def _db(amplitude: float) -> float:
    return 20 * math.log10(amplitude) if amplitude > 0 else -math.inf
