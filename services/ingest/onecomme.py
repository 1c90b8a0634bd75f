"""OneComme (わんコメ): comments from its local WebSocket feed.

OneComme collects a streamer's chats (YouTube, Twitch, TwitCasting, Niconico, …)
and serves them on ``ws://127.0.0.1:11180/sub``. Each frame is JSON with a
``type``; ``connected`` carries the recent backlog and ``comments`` the new
ones, both as ``data.comments``: a list of ``{id, service, name, url, data}``
where ``data`` holds the comment (``id``, ``userId``, ``name``/``displayName``,
``comment`` as escaped HTML with emoji as ``<img>``, ``timestamp`` in
milliseconds, ``isOwner``, ``isMember``, ``hasGift``, ``price``, ``unit``, ``paidText``).
A ``deleted`` frame (a moderator removed comments on the platform, or the
streamer in OneComme) becomes one ``message_deleted`` moderation event per
comment; OneComme's documentation of that frame is incomplete, so its ``data``
is read as a list of comments (each an entry like those of ``comments``, or a
bare id), or an object holding such a list under ``comments`` or ``ids``.
Other frame types are ignored.

The streamer's own lines (``isOwner``) are not viewers' questions and are
skipped. A paid comment becomes a Super Chat: ``price`` in major units and the
currency from ``unit`` (``¥`` → JPY, ``$`` → USD, …; ``XXX``, ISO 4217's "no
currency", for platform points such as bits). The feed reconnects with a
growing pause when OneComme restarts; ids already seen are dropped by triage.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from kotae.contracts import SuperChat
from kotae.logs import get_logger
from kotae.services.ingest.sources import ChatItem, RawComment, RawModeration

log = get_logger("kotae.ingest.onecomme")

_TAG = re.compile(r"<img[^>]*\balt=\"([^\"]*)\"[^>]*>|<[^>]+>", re.IGNORECASE)
_CURRENCY_SYMBOLS = {
    "¥": "JPY",
    "￥": "JPY",
    "円": "JPY",
    "$": "USD",
    "US$": "USD",
    "€": "EUR",
    "£": "GBP",
    "₩": "KRW",
    "CA$": "CAD",
    "A$": "AUD",
    "NT$": "TWD",
    "HK$": "HKD",
    "₱": "PHP",
    "₹": "INR",
    "R$": "BRL",
    "MX$": "MXN",
}


class OneCommeError(RuntimeError):
    """The feed cannot be used (bad URL); the message names the setting."""


def comment_text(markup: str) -> str:
    """OneComme's comment HTML as plain text: tags removed (emoji images keep their alt text), entities unescaped."""
    return html.unescape(_TAG.sub(lambda m: m.group(1) or "", markup)).strip()


def currency_of(unit: str | None, paid_text: str | None) -> str:
    """An ISO 4217 code from OneComme's ``unit`` (or the prefix of ``paidText``); ``XXX`` when there is none."""
    for candidate in (unit, re.match(r"^\D+", paid_text or "")):
        text = candidate.group(0) if isinstance(candidate, re.Match) else candidate
        text = (text or "").strip()
        if not text:
            continue
        if text in _CURRENCY_SYMBOLS:
            return _CURRENCY_SYMBOLS[text]
        if re.fullmatch(r"[A-Z]{3}", text):
            return text
    return "XXX"


def _published(value: Any) -> datetime | None:
    if isinstance(value, int | float) or (isinstance(value, str) and value.isdigit()):
        return datetime.fromtimestamp(int(value) / 1000, UTC)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _user_id(service: Any, user_id: Any) -> str | None:
    """The platform user id, qualified by service except for YouTube, whose channel
    ids hash the same as the YouTube source's, so one viewer is one author on the bus."""
    if not user_id:
        return None
    return str(user_id) if service in (None, "", "youtube") else f"{service}:{user_id}"


def parse_frame(frame: str | bytes) -> list[RawComment]:
    """The viewers' comments in one WebSocket frame (none for other frame types or a bad frame)."""
    try:
        message = json.loads(frame)
    except (json.JSONDecodeError, UnicodeDecodeError):
        log.warning("onecomme.bad_frame", frame=str(frame)[:120])
        return []
    if not isinstance(message, dict) or message.get("type") not in ("comments", "connected"):
        return []
    entries = (message.get("data") or {}).get("comments") or []
    comments = []
    for entry in entries if isinstance(entries, list) else []:
        data = entry.get("data") if isinstance(entry, dict) else None
        if not isinstance(data, dict) or data.get("isOwner"):
            continue
        try:
            text = comment_text(str(data.get("comment") or ""))
            price = data.get("price")
            paid = bool(data.get("hasGift")) and isinstance(price, int | float) and price > 0
            superchat = (
                SuperChat(amount=float(price), currency=currency_of(data.get("unit"), data.get("paidText")))
                if paid
                else None
            )
            if not text:
                if superchat is None:
                    continue  # a sticker or an image alone: nothing to read
                text = str(data.get("paidText") or f"{price:g} {superchat.currency}")
            comments.append(
                RawComment(
                    id=str(data["id"]),
                    author=str(data.get("displayName") or data.get("name") or ""),
                    author_id=_user_id(entry.get("service"), data.get("userId")),
                    text=text,
                    published_at=_published(data.get("timestamp")),
                    superchat=superchat,
                    member=bool(data.get("isMember")),  # YouTube's isChatSponsor, as OneComme passes it on
                )
            )
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            log.warning("onecomme.bad_comment", comment_id=data.get("id"), error=str(exc)[:200])
    return comments


def _deleted_ids(data: Any) -> list[str]:
    if isinstance(data, dict):
        data = data.get("comments") or data.get("ids") or []
    ids = []
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, str | int):
            ids.append(str(entry))
        elif isinstance(entry, dict):
            inner = entry.get("data") if isinstance(entry.get("data"), dict) else entry
            if inner.get("id") is not None:
                ids.append(str(inner["id"]))
    return ids


def parse_deletions(frame: str | bytes) -> list[RawModeration]:
    """The comments a ``deleted`` frame withdraws, as moderation events (none for other frames)."""
    try:
        message = json.loads(frame)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return []
    if not isinstance(message, dict) or message.get("type") != "deleted":
        return []
    stamp = datetime.now(UTC)
    return [
        RawModeration(id=f"onecomme-deleted:{cid}", action="message_deleted", comment_id=cid, published_at=stamp)
        for cid in dict.fromkeys(_deleted_ids(message.get("data")))
    ]


class OneCommeFeed:
    """Batches of comments from OneComme's WebSocket, one batch per frame.

    Example::

        async for batch in OneCommeFeed("ws://127.0.0.1:11180/sub").batches():
            await ingestor.ingest_many(batch)      # comments, and the moderation events of `deleted` frames

    ``reconnect``: keep reconnecting (with a pause that doubles up to
    ``max_pause_s``) when the connection drops or cannot be made; otherwise the
    feed ends when the server closes it.
    """

    def __init__(
        self,
        url: str = "ws://127.0.0.1:11180/sub",
        *,
        reconnect: bool = True,
        pause_s: float = 1.0,
        max_pause_s: float = 30.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise OneCommeError(
                f"KOTAE_ONECOMME_URL={url!r}: expected a ws:// or wss:// URL such as ws://127.0.0.1:11180/sub"
            )
        self.url = url
        self.reconnect = reconnect
        self.pause_s = pause_s
        self.max_pause_s = max_pause_s
        self.sleep = sleep
        self.connections = 0

    async def batches(self) -> AsyncIterator[list[ChatItem]]:
        failures = 0
        while True:
            try:
                async with connect(self.url, open_timeout=10, max_size=8 * 1024 * 1024) as ws:
                    self.connections += 1
                    failures = 0
                    log.info("onecomme.connected", url=self.url)
                    async for frame in ws:
                        batch: list[ChatItem] = [*parse_frame(frame), *parse_deletions(frame)]
                        if batch:
                            yield batch
            except InvalidURI as exc:
                raise OneCommeError(f"KOTAE_ONECOMME_URL={self.url!r}: {exc}") from None
            except (TimeoutError, ConnectionClosed, InvalidHandshake, OSError) as exc:
                failures += 1
                log.warning("onecomme.disconnected", url=self.url, error=type(exc).__name__, attempt=failures)
                if not self.reconnect:
                    return
            else:
                log.info("onecomme.closed", url=self.url)
                if not self.reconnect:
                    return
                failures += 1
            await self.sleep(min(self.max_pause_s, self.pause_s * 2 ** max(0, failures - 1)))
