"""One answer on air, sentence by sentence: what has been announced so far, and until when it plays.

The ``started`` event puts the first sentence on air; each ``sentence`` event
the next, once its clip is ready. What the events say of the airing as a whole
(``ends_at``, ``audio_ms``) is what has been announced so far, and on the final
event the whole: every field stays true at the moment it is published.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kotae.contracts import OnAirEventV1
from kotae.contracts.v1 import Lang, SpokenSentence
from kotae.services.onair.speech import Audio

#: How fast a text-only answer is read on screen when the voice failed (characters a second).
READING_RATE: dict[str, float] = {"ja": 8.0, "en": 15.0}


def text_only_ms(text: str, lang: Lang) -> int:
    """How long a text-only answer stays on air: the time to read it, at least 3 s."""
    return max(3000, round(len(text) / READING_RATE.get(lang, 8.0) * 1000))


def audio_id(key: str, attempt: int) -> str:
    """The id in an audio URL: stable for one airing, and safe in a path."""
    return hashlib.sha256(f"{key}:{attempt}".encode()).hexdigest()[:20]


def on_air(
    text: str, now: datetime, length_ms: int, audio: Audio | None, url: str, voice_failed: str | None
) -> dict[str, Any]:
    """The fields of a ``started`` event: what is said, until when by the server's clock, and its audio."""
    return {
        "speech": text,
        "started_at": now,
        "ends_at": now + timedelta(milliseconds=length_ms),
        "audio_ms": audio.duration_ms if audio else None,
        "audio_url": url if audio else None,
        "voice": audio.voice if audio else None,
        "reason": voice_failed,
    }


def reading_ms(text: str, lang: Lang) -> int:
    """How long one sentence shown as text only (its voice failed) stays up: the time to read it."""
    return round(len(text) / READING_RATE.get(lang, 8.0) * 1000)


@dataclass
class Airing:
    """The answer on air: its ``started`` event, its audio id, and the clips aired so far.

    Example::

        airing = Airing(started, aid, [first_clip])
        airing.add(second_sentence, second_clip)  # ends_at moves to the second sentence's end
        airing.carried()                          # the fields every later event of this airing repeats
    """

    started: OnAirEventV1
    aid: str
    clips: list[Audio] = field(default_factory=list)
    said: int = 1
    ends_at: datetime = field(init=False)
    reason: str | None = field(init=False)

    def __post_init__(self) -> None:
        assert self.started.ends_at is not None and self.started.started_at is not None
        self.ends_at = self.started.ends_at
        self.reason = self.started.reason

    @property
    def started_at(self) -> datetime:
        assert self.started.started_at is not None
        return self.started.started_at

    @property
    def of(self) -> int:
        """How many sentences it says (1 for an answer shown as text only)."""
        return self.started.sentence.of if self.started.sentence is not None else 1

    def add(self, sentence: SpokenSentence, clip: Audio | None) -> None:
        """The next sentence is on air (``clip`` None: shown as text only, its voice failed)."""
        self.said = sentence.n
        self.ends_at = self.started_at + timedelta(milliseconds=sentence.offset_ms + sentence.audio_ms)
        if clip is not None:
            self.clips.append(clip)

    def carried(self, whole: Audio | None = None) -> dict[str, object]:
        """What every later event of this airing says of it: until when, how much audio, and where it is.

        With ``whole`` (the clips joined, once all aired), its audio is that one file."""
        audio_ms = whole.duration_ms if whole is not None else sum(c.duration_ms for c in self.clips) or None
        return dict(
            speech=self.started.speech,
            started_at=self.started.started_at,
            ends_at=self.ends_at,
            audio_ms=audio_ms if self.started.audio_ms is not None else None,
            audio_url=f"/audio/{self.aid}.wav" if whole is not None else self.started.audio_url,
            voice=self.started.voice,
            attempt=self.started.attempt,
            resumed=self.started.resumed,
        )
