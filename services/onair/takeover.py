"""Taking over: what a standby keeps ready, and what a new speaker does with what its predecessor left on air.

A standby keeps the audio of what is on air and of what is next in line ready
(:func:`kept_ready`), so a takeover says it at once instead of waiting for the
voice; it costs one synthesis per airing. A speaker that takes over finds the
airing its predecessor left without an outcome and decides (:func:`left_on_air`):

* an FAQ entry is ``skipped`` (the chat was quiet; nothing waits for it);
* an answer no longer known is ``skipped``;
* one whose last sentence was announced and whose audio had ended is ``finished``;
* one that must come off air now (skipped, withdrawn, the stream ended) ends so;
* one interrupted twice is ``skipped``;
* anything else airs again from the start, once (``resumed``, attempt 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kotae.contracts import OnAirEventV1
from kotae.services.onair.policy import Entry
from kotae.services.onair.state import OnAir, OnAirState


@dataclass(frozen=True)
class Decision:
    """What to do with the airing left on air: ``resume`` it (attempt ``attempt``), or end it with ``outcome``."""

    outcome: str | None  # None: air it again
    reason: str | None = None
    by: str | None = None
    carried: dict[str, object] = field(default_factory=dict)
    attempt: int = 1


def kept_ready(state: OnAirState) -> dict[str, Entry]:
    """What a standby keeps synthesised: the answer on air, and the next in line (approved, in hold mode)."""
    wanted: dict[str, Entry] = {}
    on_air = state.on_air
    if on_air is not None and on_air.entry is not None:
        wanted[on_air.key] = on_air.entry
    hold = state.session.hold
    nxt = next((e for e in state.waiting() if not hold or state.approved(e)), None)
    if nxt is not None:
        wanted[nxt.key] = nxt
    return wanted


def left_on_air(
    on_air: OnAir, now: datetime, stop_reason: Callable[[Entry], tuple[str, str, str | None] | None]
) -> Decision:
    """The rules of the module docstring, in order; ``stop_reason`` says whether an entry must come off air."""
    event = on_air.event
    if event.kind == "faq":
        return Decision("skipped", "interrupted: its speaker stopped")
    entry = on_air.entry
    if entry is None:
        return Decision("skipped", "interrupted: its speaker stopped, and the answer is no longer known")
    if now >= on_air.ends_at and on_air.complete:
        # Its audio had played to the end before the speaker could say so (its last sentence event says how long).
        return Decision("finished", "finished as its speaker stopped", carried=carried(on_air.latest or event))
    stop_now = stop_reason(entry)
    if stop_now:
        outcome, reason, by = stop_now
        return Decision(outcome, reason, by, carried=carried(event))
    if on_air.attempt >= 2:
        return Decision("skipped", "interrupted twice: not aired again", carried=carried(event))
    return Decision(None, attempt=on_air.attempt + 1)


def carried(started: OnAirEventV1) -> dict[str, object]:
    """What the closing event of an interrupted airing repeats of it."""
    return dict(
        speech=started.speech,
        started_at=started.started_at,
        ends_at=started.ends_at,
        audio_ms=started.audio_ms,
        audio_url=started.audio_url,
        voice=started.voice,
        attempt=started.attempt,
        resumed=started.resumed,
    )
