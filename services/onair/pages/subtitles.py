"""Subtitles in time with the voice: when each sentence of an answer is said, read from its audio.

A voice returns one WAV for the whole answer and no timings, but it pauses
between sentences. The cue of each sentence is first estimated from its share of
the spoken text (longer sentences take longer to say), then moved to the nearest
pause found in the audio itself (a run of quiet 10 ms frames). A boundary with
no pause near it keeps its estimate; an answer shown as text only (the voice
failed) is timed by the estimate alone over the time it stays on air.

When the question is read before the answer (``KOTAE_ONAIR_READ_QUESTION``), the
first cues are the question's (``part: "question"``).

Example::

    cues(answer="運賃は150円です[1]。子どもは無料です[1]。", speech="運賃は百五十円です。子どもは無料です。",
         lang="ja", wav=wav_bytes)
    # [Cue('運賃は150円です[1]。', 0, 1720, 'answer'), Cue('子どもは無料です[1]。', 1720, 3050, 'answer')]
"""

from __future__ import annotations

import io
import re
import wave
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

FRAME_MS = 10
#: Quieter than this share of the loud frames' level is a pause.
QUIET_SHARE = 0.06
#: Shorter runs of quiet are breaths and consonants, not the pause between sentences.
MIN_PAUSE_MS = 120

_END = re.compile(r"(?<=[。！？!?])|(?<=[.])(?=\s)")
_MARKER = re.compile(r"^\s*(\[\s*\d+(?:\s*[-,、]\s*\d+)*\s*\])+")


@dataclass(frozen=True)
class Cue:
    """One sentence on screen from ``start_ms`` to ``end_ms`` of the audio."""

    text: str
    start_ms: int
    end_ms: int
    part: str = "answer"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_sentences(text: str) -> list[str]:
    """Sentences, each keeping the ``[N]`` markers that follow its end (``…です。[1]`` stays one)."""
    out: list[str] = []
    for piece in _END.split(text or ""):
        marker = _MARKER.match(piece)
        if marker and out:
            out[-1] += marker.group(0).strip()
            piece = piece[marker.end() :]
        if piece.strip():
            out.append(piece.strip())
    return out


def pauses(wav: bytes) -> tuple[list[tuple[int, int]], int]:
    """(pauses as (start_ms, end_ms) inside the speech, the audio's length in ms) of a PCM WAV."""
    with wave.open(io.BytesIO(wav)) as reader:
        rate, width, channels = reader.getframerate(), reader.getsampwidth(), reader.getnchannels()
        raw = reader.readframes(reader.getnframes())
    if width != 2:
        return [], 0
    samples = np.frombuffer(raw, dtype="<i2").astype(np.float32)
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels).mean(axis=1)
    step = max(1, rate * FRAME_MS // 1000)
    frames = len(samples) // step
    length_ms = round(len(samples) * 1000 / rate)
    if frames < 3:
        return [], length_ms
    rms = np.sqrt(np.mean(samples[: frames * step].reshape(frames, step) ** 2, axis=1))
    loud = np.percentile(rms, 90)
    if loud <= 0:
        return [], length_ms
    quiet = rms < loud * QUIET_SHARE
    runs: list[tuple[int, int]] = []
    start = None
    for i, still in enumerate(quiet):
        if still and start is None:
            start = i
        elif not still and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, frames))
    inside = [(a * FRAME_MS, b * FRAME_MS) for a, b in runs if a > 0 and b < frames]
    return [(a, b) for a, b in inside if b - a >= MIN_PAUSE_MS], length_ms


def _speech_bounds(wav: bytes | None, duration_ms: int) -> tuple[int, int, list[tuple[int, int]]]:
    """Where the speech starts and ends in the audio, and the pauses between."""
    if not wav:
        return 0, duration_ms, []
    try:
        found, length = pauses(wav)
    except (wave.Error, EOFError, ValueError):
        return 0, duration_ms, []
    return 0, length or duration_ms, found


def _boundaries(weights: list[float], begin: int, end: int, gaps: list[tuple[int, int]]) -> list[int]:
    """Where one sentence ends and the next begins: the estimate, moved to the nearest pause."""
    total = sum(weights) or 1.0
    span = max(1, end - begin)
    estimates, acc = [], 0.0
    for weight in weights[:-1]:
        acc += weight
        estimates.append(begin + span * acc / total)
    bounds: list[int] = []
    last = begin
    mean = span / max(1, len(weights))
    for estimate in estimates:
        near = [(abs((a + b) / 2 - estimate), (a + b) // 2) for a, b in gaps if (a + b) / 2 > last]
        best = min(near, default=None)
        at = best[1] if best is not None and best[0] <= mean * 0.5 else round(estimate)
        at = max(at, last + 1)
        bounds.append(at)
        last = at
    return bounds


def cues(
    *,
    answer: str,
    speech: str | None,
    lang: str,
    wav: bytes | None,
    duration_ms: int,
    question_read: bool = False,
) -> list[Cue]:
    """The answer's sentences (and the question's, when it was read first), each with its time in the audio."""
    shown = split_sentences(answer)
    if not shown:
        return []
    said = split_sentences(speech or "")
    lead = len(said) - len(shown) if question_read and len(said) > len(shown) else 0
    if said and len(said) == len(shown) + lead:
        weights = [float(len(s)) for s in said]
    else:
        lead, weights = 0, [float(len(s)) for s in shown]
    begin, end, gaps = _speech_bounds(wav, duration_ms)
    bounds = [begin, *_boundaries(weights, begin, end, gaps), end]
    texts = [*said[:lead], *shown]
    parts = ["question"] * lead + ["answer"] * len(shown)
    return [Cue(texts[i], bounds[i], bounds[i + 1], parts[i]) for i in range(len(texts))]
