"""The stream's current show, as the on-air stage keeps it: what scopes ingest's answer cache.

The on-air stage writes ``show.<stream>`` (``{"id", "started_at"}``) in its key-value
bucket (``KOTAE_ONAIR_KV_BUCKET``) when a show begins. Ingest only reads that key:
an answer verified in one show is never repeated from the cache in the next. With no
on-air stage there is no bucket and no show (``None``), and the cache keeps one scope.

The key is read again at each question (one message get), so a new show is followed
from the next comment on; a bucket that is missing, or a read that failed, is tried
again at most every ``recheck_s`` seconds (meanwhile: no show, or the show unknown).

Example::

    show = CurrentShow(js, "kotae_onair", stream_id="s1")
    await show.current()   # Show(id='show-20261204T190000Z-1a2b', started_at=…) or None
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import nats.errors
import nats.js.errors

from kotae.logs import get_logger

log = get_logger("kotae.ingest")


def show_key(stream_id: str) -> str:
    """The key of a stream's current show, spelled as the on-air stage spells its keys (few characters allowed)."""
    if re.fullmatch(r"[A-Za-z0-9_=-]{1,64}", stream_id):
        return f"show.{stream_id}"
    return f"show.h{hashlib.sha256(stream_id.encode()).hexdigest()[:24]}"


@dataclass(frozen=True)
class Show:
    """A show of the stream: its id, and when it began."""

    id: str
    started_at: datetime

    def has(self, at: datetime) -> bool:
        """Whether something made at ``at`` belongs to this show (not to an earlier one)."""
        return at >= self.started_at


def _parse(data: bytes | None) -> Show | None:
    if not data:
        return None
    try:
        raw = json.loads(data)
        return Show(str(raw["id"]), datetime.fromisoformat(raw["started_at"]))
    except (ValueError, KeyError, TypeError):
        log.warning("ingest.show_unreadable", value=data[:120].decode("utf-8", "replace"))
        return None


class CurrentShow:
    """Reads the current show of one stream from the on-air stage's bucket (see the module docstring)."""

    def __init__(
        self,
        js: Any,
        bucket: str,
        *,
        stream_id: str,
        recheck_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.js = js
        self.bucket = bucket
        self.key = show_key(stream_id)
        self.recheck_s = recheck_s
        self.clock = clock
        self._kv: Any = None
        self._looked_at: float | None = None
        self._failed_at: float | None = None

    async def _bucket(self) -> Any:
        if self._kv is not None:
            return self._kv
        now = self.clock()
        if self._looked_at is not None and now - self._looked_at < self.recheck_s:
            return None
        self._looked_at = now
        try:
            self._kv = await self.js.key_value(self.bucket)
        except nats.js.errors.BucketNotFoundError:
            return None  # no on-air stage has run on this bus: no show
        return self._kv

    async def current(self) -> Show | None:
        """The show on air now, or None (no on-air stage, or no show begun yet)."""
        if self._failed_at is not None and self.clock() - self._failed_at < self.recheck_s:
            # Asked again only after a pause: a read that timed out must not slow every question down.
            raise ShowUnknown("the current show could not be read a moment ago")
        kv = await self._bucket()
        if kv is None:
            return None
        try:
            entry = await kv.get(self.key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        except (nats.errors.TimeoutError, nats.js.errors.APIError) as exc:
            # The bus slow for a moment: no show is known, so nothing of any show is answered from the cache.
            self._failed_at = self.clock()
            log.warning("ingest.show_unknown", error=f"{type(exc).__name__}: {exc}", retry_in_s=self.recheck_s)
            raise ShowUnknown(str(exc)) from exc
        self._failed_at = None
        return _parse(entry.value)


class ShowUnknown(RuntimeError):
    """The current show could not be read just now (the bus timed out): the cache answers nothing meanwhile."""
