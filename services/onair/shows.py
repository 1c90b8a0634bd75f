"""Shows: the on-air state of a stream belongs to one show at a time.

A rehearsal replay, yesterday's stream or ``kotae demo`` leaves verified answers
in the answers stream that are still younger than the age limit. A show draws
the line: what was verified (or received) before the show began never airs in
it, and the operator's session (pause, end, approvals, FAQ aired) starts afresh;
blocked viewers and hold mode carry over.

The current show of a stream is ``show.<stream>`` in the stage's bucket,
``{"id", "started_at"}``. A process named a show (``KOTAE_ONAIR_SHOW``) continues
it when it is the current one and otherwise starts it now, by compare-and-set, so
the speaker and its standby, started together with the same name, agree on one
show. ``kotae up|replay|demo --onair`` name a new show each run; ``--show ID``
continues show ID. A process named none continues the current show; the first
show of a stream, started that way, takes what its rebuild window holds.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

import nats.js.errors
import structlog
from nats.js.kv import KeyValue

log = structlog.get_logger("kotae.onair")


def new_show_id(now: datetime | None = None) -> str:
    """A fresh show id: when it began, and a few random characters (two shows in one second differ)."""
    at = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"show-{at}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class Show:
    """One show of a stream: what airs in it was verified after ``started_at``."""

    id: str
    started_at: datetime

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, "started_at": self.started_at.isoformat()}).encode()

    @classmethod
    def from_json(cls, data: bytes | None) -> Show | None:
        if not data:
            return None
        try:
            raw = json.loads(data)
            return cls(str(raw["id"]), datetime.fromisoformat(raw["started_at"]))
        except (ValueError, KeyError, TypeError):
            return None

    def has(self, at: datetime | None) -> bool:
        """Whether something made at ``at`` belongs to this show (not to an earlier one)."""
        return at is None or at >= self.started_at


async def _current(kv: KeyValue, key: str) -> tuple[Show | None, int | None]:
    try:
        entry = await kv.get(key)
    except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
        return None, None
    return Show.from_json(entry.value), entry.revision


async def establish(kv: KeyValue, key: str, wanted: str | None, *, first_since: datetime) -> tuple[Show, bool]:
    """(the show this process airs, whether it began now): see the module docstring.

    ``first_since``: where the first show of a stream named by nobody begins (the rebuild window).
    """
    for _ in range(5):  # another replica may write the key between our read and our write
        current, revision = await _current(kv, key)
        if current is not None and (wanted is None or wanted == current.id):
            return current, False
        show = Show(wanted or new_show_id(), datetime.now(UTC) if wanted else first_since)
        try:
            if revision is None:
                await kv.create(key, show.to_json())
            else:
                await kv.update(key, show.to_json(), last=revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            again, _ = await _current(kv, key)
            if again is not None and again.id == show.id:
                return again, True  # its twin began it a moment ago
            continue
        log.info("onair.show_started", show_id=show.id, previous=current.id if current else None)
        return show, True
    raise RuntimeError(f"{key}: the current show kept changing while this process tried to start {wanted!r}")
