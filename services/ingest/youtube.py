"""YouTube live chat through the YouTube Data API v3.

``videos.list(part=liveStreamingDetails)`` gives the video's ``activeLiveChatId``;
``liveChatMessages.list`` is then polled page after page:

* the next call waits at least ``pollingIntervalMillis`` (the API's own pace),
  at least ``KOTAE_YOUTUBE_MIN_POLL_S``, and at least the share of the day that
  the remaining quota affords: the remaining budget (``KOTAE_YOUTUBE_QUOTA_PER_DAY``
  less what was spent today, ``KOTAE_YOUTUBE_LIST_COST`` units a call) is spread
  over the time left until the quota resets at midnight Pacific Time (or over
  ``KOTAE_YOUTUBE_SPREAD_HOURS`` for a stream of known length), so the poller
  slows down instead of running dry;
* ``nextPageToken`` is stored in JetStream KV after each page has been handled,
  so a restarted poller resumes from the last page without re-reading history;
  the units spent today are stored there too;
* ``403 quotaExceeded`` / ``rateLimitExceeded``, 429 and 5xx back off
  exponentially (``KOTAE_YOUTUBE_BACKOFF_S`` doubling up to ``…_MAX_BACKOFF_S``);
* the chat's end — ``offlineAt`` in a page, a ``chatEndedEvent``,
  ``liveChatEnded``/``liveChatNotFound``/``liveChatDisabled``, or a video without
  an ``activeLiveChatId`` — stops the poller cleanly with the reason.

Text messages and Super Chats become :class:`RawComment` (amount in major units
from ``amountMicros``, currency kept; ``isChatSponsor`` says a member asked), and so
do membership events (``newSponsorEvent``, ``memberMilestoneChatEvent`` with its
optional ``userComment``, ``membershipGiftingEvent``, ``giftMembershipReceivedEvent``:
see :func:`membership_of`), which the on-air stage thanks; the
author's channel id travels only as ``author_id``, which triage hashes with the
salt before anything is published. A moderator's ``messageDeletedEvent`` and
``userBannedEvent`` become :class:`RawModeration` (the deleted message's id; the
banned viewer's channel id, hashed the same way), which ingest publishes as
``moderation.v1`` so nothing of theirs airs.
The key goes in the ``X-goog-api-key`` header (never in a URL, so never in a log);
an OAuth token goes in ``Authorization``.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
from pydantic import ValidationError

from kotae.contracts import SuperChat
from kotae.contracts.v1 import Membership
from kotae.logs import get_logger
from kotae.services.ingest.sources import ChatItem, RawComment, RawModeration
from kotae.services.ingest.state import IngestState

log = get_logger("kotae.ingest.youtube")

QUOTA_TZ = ZoneInfo("America/Los_Angeles")  # YouTube's daily quota resets at midnight Pacific Time
_BACKOFF_REASONS = {"quotaExceeded", "rateLimitExceeded", "userRateLimitExceeded", "backendError"}
_END_REASONS = {"liveChatEnded", "liveChatNotFound", "liveChatDisabled", "videoNotFound"}


class YouTubeError(RuntimeError):
    """The API refused the poller for good (bad key, forbidden); the message names the setting."""


def _reason(resp: httpx.Response) -> str:
    """The ``errors[0].reason`` of an API error body ('' when there is none)."""
    try:
        error = resp.json().get("error") or {}
        errors = error.get("errors") or [{}]
        return str(errors[0].get("reason") or error.get("status") or "")
    except (ValueError, AttributeError, IndexError):
        return ""


class QuotaMeter:
    """Units spent today against the daily budget, kept in ingest's state.

    ``min_interval`` is the pause that spreads what is left over what is left
    of the quota day: with 1,000 units and 5 hours to go, one 5-unit call every
    90 seconds at most.
    """

    def __init__(
        self,
        state: IngestState,
        budget: int,
        *,
        clock: Callable[[], float] = time.time,
        key: str = "youtube.quota",
        spread_s: float | None = None,
    ) -> None:
        self.state = state
        self.budget = budget
        self.clock = clock
        self.key = key
        # A stream of known length may spend the budget over that length instead of the rest of the day.
        self.spread_until = clock() + spread_s if spread_s else None
        self.used = 0
        self._day: str | None = None

    def _today(self) -> str:
        return datetime.fromtimestamp(self.clock(), QUOTA_TZ).date().isoformat()

    async def _roll(self) -> None:
        day = self._today()
        if day != self._day:
            self._day = day
            stored = await self.state.get(f"{self.key}.{day}")
            self.used = int(stored) if stored and stored.isdigit() else 0

    async def charge(self, units: int) -> None:
        await self._roll()
        self.used += units
        await self.state.put(f"{self.key}.{self._day}", str(self.used))

    async def remaining(self) -> int:
        await self._roll()
        return max(0, self.budget - self.used)

    def seconds_to_reset(self) -> float:
        now = datetime.fromtimestamp(self.clock(), QUOTA_TZ)
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), QUOTA_TZ)
        return max(1.0, (midnight - now).total_seconds())

    async def min_interval(self, cost: int) -> float:
        """Seconds between calls of ``cost`` units so the budget lasts the day (inf when none is left)."""
        if cost <= 0:
            return 0.0
        calls = await self.remaining() // cost
        horizon = self.seconds_to_reset()
        if self.spread_until is not None:
            horizon = min(horizon, max(1.0, self.spread_until - self.clock()))
        return horizon / calls if calls else math.inf


class YouTubeLiveChat:
    """One video's live chat, polled until it ends.

    Example::

        chat = YouTubeLiveChat("dQw4w9WgXcQ", api_key="…", state=await KvState.open(js, "kotae_ingest"))
        async for page in chat.pages():
            await ingestor.ingest_many(page)
        chat.end_reason   # 'offline', 'chat_ended', 'liveChatEnded', …
    """

    def __init__(
        self,
        video_id: str,
        *,
        state: IngestState,
        base_url: str = "https://www.googleapis.com/youtube/v3",
        api_key: str | None = None,
        oauth_token: str | None = None,
        quota_per_day: int = 10_000,
        list_cost: int = 5,
        video_cost: int = 1,
        min_poll_s: float = 1.0,
        backoff_s: float = 30.0,
        max_backoff_s: float = 900.0,
        spread_s: float | None = None,
        client: httpx.AsyncClient | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not api_key and not oauth_token:
            raise YouTubeError("YouTube needs a key or a token: set KOTAE_YOUTUBE_API_KEY or KOTAE_YOUTUBE_OAUTH_TOKEN")
        self.video_id = video_id
        self.state = state
        self.base_url = base_url.rstrip("/")
        self._headers = {"X-goog-api-key": api_key} if api_key else {"Authorization": f"Bearer {oauth_token}"}
        self._credential = "KOTAE_YOUTUBE_API_KEY" if api_key else "KOTAE_YOUTUBE_OAUTH_TOKEN"
        self.quota = QuotaMeter(state, quota_per_day, clock=clock, spread_s=spread_s)
        self.list_cost = list_cost
        self.video_cost = video_cost
        self.min_poll_s = min_poll_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._client = client
        self.sleep = sleep
        self.end_reason: str | None = None
        self.calls = 0
        self.waits: list[tuple[str, float]] = []  # (why, seconds) of every pause, for operators and tests

    @classmethod
    def from_settings(cls, settings: Any, video_id: str, state: IngestState, **overrides: Any) -> YouTubeLiveChat:
        """A poller configured by the ``KOTAE_YOUTUBE_*`` settings."""
        key, token = settings.youtube_api_key, settings.youtube_oauth_token
        options: dict[str, Any] = dict(
            state=state,
            base_url=settings.youtube_base_url,
            api_key=key.get_secret_value() if key else None,
            oauth_token=token.get_secret_value() if token else None,
            quota_per_day=settings.youtube_quota_per_day,
            list_cost=settings.youtube_list_cost,
            video_cost=settings.youtube_video_cost,
            min_poll_s=settings.youtube_min_poll_s,
            backoff_s=settings.youtube_backoff_s,
            max_backoff_s=settings.youtube_max_backoff_s,
            spread_s=settings.youtube_spread_hours * 3600 if settings.youtube_spread_hours else None,
        )
        options.update(overrides)
        return cls(video_id, **options)

    def __repr__(self) -> str:  # never show the credential
        return f"YouTubeLiveChat(video_id={self.video_id!r}, base_url={self.base_url!r})"

    # --- HTTP -----------------------------------------------------------------

    async def _pause(self, why: str, seconds: float) -> None:
        self.waits.append((why, seconds))
        await self.sleep(seconds)

    async def _get(self, path: str, params: dict[str, Any], cost: int) -> httpx.Response | None:
        """One API call, charged to the quota; None when the call must be retried after a back-off."""
        client = self._client
        if client is None:
            client = self._client = httpx.AsyncClient(timeout=20.0)
        self.calls += 1
        await self.quota.charge(cost)  # a refused call costs quota too
        try:
            resp = await client.get(f"{self.base_url}/{path}", params=params, headers=self._headers)
        except httpx.HTTPError as exc:
            log.warning("youtube.transport_error", error=type(exc).__name__, path=path)
            return None
        if resp.status_code in (401,) or _reason(resp) in (
            "keyInvalid",
            "authError",
            "forbidden",
            "insufficientPermissions",
        ):
            raise YouTubeError(
                f"YouTube refused the credential ({resp.status_code} {_reason(resp)}): check {self._credential}"
            )
        return resp

    async def _backoff(self, attempt: int, why: str) -> None:
        seconds = min(self.max_backoff_s, self.backoff_s * (2 ** (attempt - 1)))
        log.warning("youtube.backoff", reason=why, seconds=seconds, attempt=attempt)
        await self._pause(f"backoff:{why}", seconds)

    async def find_chat_id(self) -> str | None:
        """The video's active live chat id; None (and ``end_reason``) when it has none."""
        attempt = 0
        while True:
            resp = await self._get("videos", {"part": "liveStreamingDetails", "id": self.video_id}, self.video_cost)
            if resp is not None and resp.status_code == 200:
                items = resp.json().get("items") or []
                if not items:
                    self.end_reason = "video_not_found"
                    return None
                details = items[0].get("liveStreamingDetails") or {}
                chat_id = details.get("activeLiveChatId")
                if not chat_id:
                    self.end_reason = "no_active_live_chat" if not details.get("actualEndTime") else "stream_ended"
                    return None
                return str(chat_id)
            attempt += 1
            why = _reason(resp) if resp is not None else "transport"
            if resp is not None and resp.status_code < 500 and why not in _BACKOFF_REASONS and resp.status_code != 429:
                raise YouTubeError(f"videos.list for {self.video_id!r} failed: HTTP {resp.status_code} {why}".rstrip())
            await self._backoff(attempt, why or f"http_{resp.status_code if resp is not None else 0}")

    # --- polling ----------------------------------------------------------------

    @property
    def credential_headers(self) -> dict[str, str]:
        """The credential as request headers (``X-goog-api-key`` or ``Authorization``): never a URL parameter."""
        return dict(self._headers)

    @property
    def credential_setting(self) -> str:
        """The setting that holds the credential in use, for error messages."""
        return self._credential

    def page_token_key(self, chat_id: str) -> str:
        """The state key of a chat's last page token; ``streamList`` resumes from the same one."""
        return "youtube.page." + hashlib.sha256(chat_id.encode()).hexdigest()[:24]

    async def pages(self) -> AsyncIterator[list[ChatItem]]:
        """Pages of comments (and moderation events) until the chat ends; each page's token is saved once
        the caller took the page."""
        chat_id = await self.find_chat_id()
        if chat_id is None:
            log.info("youtube.no_chat", video_id=self.video_id, reason=self.end_reason)
            return
        async for page in self.poll(chat_id):
            yield page

    async def poll(self, chat_id: str) -> AsyncIterator[list[ChatItem]]:
        """``liveChatMessages.list`` page after page for a known chat, from its stored page token."""
        token_key = self.page_token_key(chat_id)
        token = await self.state.get(token_key)
        log.info("youtube.polling", video_id=self.video_id, resumed=token is not None)
        attempt = 0
        while True:
            wait = await self.quota.min_interval(self.list_cost)
            if math.isinf(wait):
                await self._pause("quota_reset", self.quota.seconds_to_reset())
                continue
            params = {"liveChatId": chat_id, "part": "snippet,authorDetails", "maxResults": 2000}
            if token:
                params["pageToken"] = token
            resp = await self._get("liveChat/messages", params, self.list_cost)
            if resp is None or resp.status_code != 200:
                why = _reason(resp) if resp is not None else "transport"
                if resp is not None and why in _END_REASONS:
                    self.end_reason = why
                    log.info("youtube.chat_ended", video_id=self.video_id, reason=why)
                    return
                if (
                    resp is not None
                    and resp.status_code < 500
                    and resp.status_code != 429
                    and why not in _BACKOFF_REASONS
                ):
                    raise YouTubeError(f"liveChatMessages.list failed: HTTP {resp.status_code} {why}".rstrip())
                attempt += 1
                await self._backoff(attempt, why or f"http_{resp.status_code if resp is not None else 0}")
                continue
            attempt = 0
            body = resp.json()
            items = body.get("items") or []
            comments, ended = parse_messages(items)
            yield [*comments, *parse_moderation(items)]
            next_token = body.get("nextPageToken")
            if next_token:
                token = str(next_token)
                await self.state.put(token_key, token)
            if ended or body.get("offlineAt"):
                self.end_reason = "offline" if body.get("offlineAt") else "chat_ended"
                log.info("youtube.chat_ended", video_id=self.video_id, reason=self.end_reason)
                return
            interval = max(float(body.get("pollingIntervalMillis") or 0) / 1000.0, self.min_poll_s)
            budget_wait = await self.quota.min_interval(self.list_cost)
            if budget_wait > interval:
                await self._pause("quota_budget", min(budget_wait, self.quota.seconds_to_reset()))
            else:
                await self._pause("polling_interval", interval)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


#: YouTube's membership events, by the kind kotae names them.
MEMBERSHIP_EVENTS = {
    "newSponsorEvent": ("new_member", "newSponsorDetails"),
    "memberMilestoneChatEvent": ("milestone", "memberMilestoneChatDetails"),
    "membershipGiftingEvent": ("gift", "membershipGiftingDetails"),
    "giftMembershipReceivedEvent": ("gift_received", "giftMembershipReceivedDetails"),
}


def membership_of(snippet: dict[str, Any]) -> tuple[Membership, str] | None:
    """A membership event's :class:`Membership` and the comment's text, or None for other kinds.

    Only a milestone carries a message of the viewer's own (``userComment``), and only that
    message may be a question; otherwise the text is the platform's ``displayMessage`` (say,
    "Welcome to …!"), which triage never sends on as a question and the voice never reads.
    """
    known = MEMBERSHIP_EVENTS.get(snippet.get("type") or "")
    if known is None:
        return None
    kind, details_field = known
    details = snippet.get(details_field) or {}
    message = str(details.get("userComment") or "").strip() if kind == "milestone" else ""
    months, gifts = details.get("memberMonth"), details.get("giftMembershipsCount")
    membership = Membership(
        kind=kind,  # type: ignore[arg-type]  # one of MembershipKind by the table above
        level=details.get("memberLevelName") or details.get("giftMembershipsLevelName"),
        months=int(months) if months is not None else None,
        gifts=int(gifts) if gifts is not None else None,
        with_message=bool(message),
    )
    return membership, message or str(snippet.get("displayMessage") or "").strip() or kind


def parse_messages(items: list[dict[str, Any]]) -> tuple[list[RawComment], bool]:
    """Text messages, Super Chats and membership events of a page as comments, and whether the chat
    ended in it.

    Other events (stickers, polls; deletions and bans are :func:`parse_moderation`'s) are
    skipped; a malformed item is logged and skipped, never fatal.
    """
    comments: list[RawComment] = []
    ended = False
    for item in items:
        snippet = item.get("snippet") or {}
        kind = snippet.get("type")
        if kind == "chatEndedEvent":
            ended = True
            continue
        if kind not in ("textMessageEvent", "superChatEvent", *MEMBERSHIP_EVENTS):
            continue
        author = item.get("authorDetails") or {}
        try:
            member = bool(author.get("isChatSponsor"))
            superchat = membership = None
            event = membership_of(snippet)
            if event is not None:
                membership, text = event
                member = kind != "membershipGiftingEvent" or member  # a giver need not be a member
            elif kind == "superChatEvent":
                details = snippet.get("superChatDetails") or {}
                superchat = SuperChat(
                    amount=int(details["amountMicros"]) / 1_000_000, currency=str(details["currency"])
                )
                text = (
                    details.get("userComment")
                    or snippet.get("displayMessage")
                    or details.get("amountDisplayString")
                    or "Super Chat"
                )
            else:
                text = (
                    (snippet.get("textMessageDetails") or {}).get("messageText") or snippet.get("displayMessage") or ""
                )
            if not text.strip():
                continue
            comments.append(
                RawComment(
                    id=str(item["id"]),
                    author=str(author.get("displayName") or ""),
                    author_id=author.get("channelId") or snippet.get("authorChannelId"),
                    text=text,
                    published_at=snippet.get("publishedAt"),
                    superchat=superchat,
                    member=member,
                    membership=membership,
                )
            )
        except (KeyError, ValueError, TypeError, ValidationError) as exc:
            log.warning("youtube.bad_item", item_id=item.get("id"), error=str(exc)[:200])
    return comments, ended


def parse_moderation(items: list[dict[str, Any]]) -> list[RawModeration]:
    """A page's ``messageDeletedEvent`` and ``userBannedEvent`` items, as moderation events.

    ``messageDeletedDetails.deletedMessageId`` names the comment; a ban names the
    viewer by ``userBannedDetails.bannedUserDetails.channelId``, with its
    ``banType`` and, for a temporary ban, ``banDurationSeconds``. A malformed item
    is logged and skipped.
    """
    events: list[RawModeration] = []
    for item in items:
        snippet = item.get("snippet") or {}
        kind = snippet.get("type")
        try:
            if kind == "messageDeletedEvent":
                details = snippet.get("messageDeletedDetails") or {}
                events.append(
                    RawModeration(
                        id=str(item["id"]),
                        action="message_deleted",
                        comment_id=str(details["deletedMessageId"]),
                        published_at=snippet.get("publishedAt"),
                    )
                )
            elif kind == "userBannedEvent":
                details = snippet.get("userBannedDetails") or {}
                user = details.get("bannedUserDetails") or {}
                duration = details.get("banDurationSeconds")
                events.append(
                    RawModeration(
                        id=str(item["id"]),
                        action="user_banned",
                        author=str(user.get("displayName") or ""),
                        author_id=str(user["channelId"]),
                        ban_type=details.get("banType") or "permanent",
                        ban_duration_s=int(duration) if duration is not None else None,
                        published_at=snippet.get("publishedAt"),
                    )
                )
        except (KeyError, ValueError, TypeError, ValidationError) as exc:
            log.warning("youtube.bad_moderation_item", item_id=item.get("id"), error=str(exc)[:200])
    return events
