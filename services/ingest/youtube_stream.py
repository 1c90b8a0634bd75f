"""YouTube live chat through ``liveChatMessages.streamList``, with ``list`` polling as the fallback.

``streamList`` is a gRPC server-streaming call (``youtube.api.v3.V3DataLiveChatMessageService/
StreamList``, the messages of ``stream_list.proto`` beside this file): on connect the server sends
the chat's recent history, then pushes each message as it is posted, every response carrying a
``next_page_token``. A message reaches ingest as soon as YouTube has it, instead of up to a whole
``pollingIntervalMillis`` later, and one call (5 quota units, as a ``list`` call) lasts as long as
the connection does.

* The chat is found as the poller finds it (``videos.list``, 1 unit); the stored page token is
  the poller's own key, so switching between the two transports neither repeats nor skips a page.
* Each response's token is stored once the caller took the page; after a dropped connection or a
  restart the next call sends it as ``page_token`` and the server resumes right after it. A page
  re-sent after a crash is stored once by the bus (``Nats-Msg-Id``) and reported as ``resend``.
* Retries follow Google's guidance for its gRPC APIs: ``UNAVAILABLE`` and the like are retried
  with an exponential back-off (``reconnect_s`` doubling up to ``KOTAE_YOUTUBE_MAX_BACKOFF_S``,
  reset once a connection delivers); ``RESOURCE_EXHAUSTED`` or a ``quotaExceeded`` /
  ``rateLimitExceeded`` refusal backs off from ``KOTAE_YOUTUBE_BACKOFF_S``. A stream the server
  closes is reopened, never faster than the daily quota spread allows.
* A stream the endpoint refuses — ``UNIMPLEMENTED``, ``PERMISSION_DENIED``, ``FAILED_PRECONDITION``
  (not enabled for the project, not allowed for this credential) — falls back to ``list`` polling
  for the rest of the run, and so does an endpoint never reached in ``unreachable_after`` tries; the change is logged (``youtube.transport``) and reported to
  ``on_transport`` for the command's status line.
* ``offline_at``, a ``chatEndedEvent``, ``NOT_FOUND`` or a ``liveChatEnded`` refusal ends the run.
* The key travels as ``x-goog-api-key`` metadata (an OAuth token as ``authorization: Bearer``),
  never in a request field, a URL or a log.

Each pushed message is turned into the REST resource's JSON shape and read by the poller's own
parsers, so both transports give the same comments and moderation events.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import json_format

from kotae.logs import get_logger
from kotae.services.ingest import stream_list_pb2 as pb
from kotae.services.ingest.sources import ChatItem
from kotae.services.ingest.state import IngestState
from kotae.services.ingest.youtube import YouTubeError, YouTubeLiveChat, parse_messages, parse_moderation

log = get_logger("kotae.ingest.youtube")

DEFAULT_TARGET = "youtube.googleapis.com:443"
_SERVICE = pb.DESCRIPTOR.services_by_name["V3DataLiveChatMessageService"]
STREAM_LIST = "/{}/{}".format(_SERVICE.full_name, _SERVICE.methods_by_name["StreamList"].name)
PARTS = ("id", "snippet", "authorDetails")

_REFUSED = {grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION}
_QUOTA_REASONS = ("quotaExceeded", "rateLimitExceeded", "userRateLimitExceeded")
_END_REASONS = ("liveChatEnded", "liveChatNotFound", "liveChatDisabled")
_UNREACHABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED")
# Keep-alive pings find a connection that died silently (a NAT that forgot it) within about a minute.
_CHANNEL_OPTIONS = (("grpc.keepalive_time_ms", 60_000), ("grpc.keepalive_timeout_ms", 20_000))

TransportListener = Callable[[str, str | None], None]


def _lower_camel(name: str) -> str:
    head, *rest = name.lower().split("_")
    return head + "".join(part.title() for part in rest)


def rest_item(message: pb.LiveChatMessage) -> dict[str, Any]:
    """A pushed message in the REST ``liveChatMessage`` JSON shape that the poller's parsers read.

    The JSON names of the proto fields are the REST names already; only the enums differ in
    spelling (``TEXT_MESSAGE_EVENT`` → ``textMessageEvent``, ``PERMANENT`` → ``permanent``).
    """
    item = json_format.MessageToDict(message)
    snippet = item.get("snippet") or {}
    if isinstance(snippet.get("type"), str):
        snippet["type"] = _lower_camel(snippet["type"])
    banned = snippet.get("userBannedDetails") or {}
    if isinstance(banned.get("banType"), str):
        banned["banType"] = banned["banType"].lower()
    return item


def _reason(error: grpc.aio.AioRpcError) -> str:
    """The API's error reason named in the status message ('' when it names none)."""
    details = error.details() or ""
    for reason in (*_QUOTA_REASONS, *_END_REASONS):
        if reason in details:
            return reason
    return ""


def _is_loopback(target: str) -> bool:
    host = re.sub(r"^(dns:|ipv4:|ipv6:)/*", "", target).rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class YouTubeChatStream:
    """One video's live chat, pushed by ``streamList`` until it ends (or polled, when refused).

    Example::

        poller = YouTubeLiveChat("dQw4w9WgXcQ", api_key="…", state=state)
        chat = YouTubeChatStream(poller)
        async for page in chat.pages():
            await ingestor.ingest_many(page)
        chat.transport, chat.end_reason   # ('stream', 'offline'), or ('poll', …) after a fallback

    ``target`` is the gRPC endpoint; a loopback address (a local fake) is spoken to in plain
    text, anything else over TLS only, so a credential never crosses a network in the clear.
    """

    def __init__(
        self,
        poller: YouTubeLiveChat,
        *,
        target: str = DEFAULT_TARGET,
        reconnect_s: float = 1.0,
        unreachable_after: int = 3,
        on_transport: TransportListener | None = None,
    ) -> None:
        self.poller = poller
        self.target = target
        self.reconnect_s = reconnect_s
        self.unreachable_after = unreachable_after
        self.on_transport = on_transport
        self.transport = "stream"
        self.fallback_reason: str | None = None
        self.end_reason: str | None = None
        self.calls = 0
        self.waits: list[tuple[str, float]] = []  # (why, seconds) of every pause, as the poller keeps them
        self._connected_at: float | None = None
        self._delivered = False  # whether any call of this run got a response
        self._metadata = tuple((name.lower(), value) for name, value in poller.credential_headers.items())

    @classmethod
    def from_settings(
        cls,
        settings: Any,
        video_id: str,
        state: IngestState,
        *,
        reconnect_s: float = 1.0,
        on_transport: TransportListener | None = None,
        **poller_overrides: Any,
    ) -> YouTubeChatStream:
        """A stream configured by the ``KOTAE_YOUTUBE_*`` settings, over a poller for the fallback."""
        poller = YouTubeLiveChat.from_settings(settings, video_id, state, **poller_overrides)
        return cls(poller, target=settings.youtube_stream_target, reconnect_s=reconnect_s, on_transport=on_transport)

    def __repr__(self) -> str:  # never show the credential
        return f"YouTubeChatStream(video_id={self.poller.video_id!r}, target={self.target!r})"

    @property
    def quota(self) -> Any:
        """The quota meter, shared with the poller: both transports spend one daily budget."""
        return self.poller.quota

    async def aclose(self) -> None:
        await self.poller.aclose()

    # --- the run --------------------------------------------------------------------------------

    async def pages(self) -> AsyncIterator[list[ChatItem]]:
        """Pages of comments and moderation events until the chat ends, by stream or, when refused, by polling."""
        chat_id = await self.poller.find_chat_id()
        if chat_id is None:
            self.end_reason = self.poller.end_reason
            log.info("youtube.no_chat", video_id=self.poller.video_id, reason=self.end_reason)
            return
        self._announce("stream", None)
        async for page in self._stream(chat_id):
            yield page
        if self.transport == "poll":
            async for page in self.poller.poll(chat_id):
                yield page
            self.end_reason = self.poller.end_reason

    def _announce(self, transport: str, reason: str | None) -> None:
        self.transport = transport
        if transport == "poll":
            self.fallback_reason = reason
        log.info("youtube.transport", video_id=self.poller.video_id, transport=transport, reason=reason)
        if self.on_transport is not None:
            self.on_transport(transport, reason)

    def _channel(self) -> grpc.aio.Channel:
        if _is_loopback(self.target):
            return grpc.aio.insecure_channel(self.target, options=_CHANNEL_OPTIONS)
        return grpc.aio.secure_channel(self.target, grpc.ssl_channel_credentials(), options=_CHANNEL_OPTIONS)

    async def _stream(self, chat_id: str) -> AsyncIterator[list[ChatItem]]:
        token_key = self.poller.page_token_key(chat_id)
        token = await self.poller.state.get(token_key)
        log.info("youtube.streaming", video_id=self.poller.video_id, resumed=token is not None)
        channel = self._channel()
        stream_list = channel.unary_stream(
            STREAM_LIST,
            request_serializer=pb.LiveChatMessageListRequest.SerializeToString,
            response_deserializer=pb.LiveChatMessageListResponse.FromString,
        )
        failures = 0
        try:
            while True:
                if not await self._quota_allows():
                    continue
                request = pb.LiveChatMessageListRequest(live_chat_id=chat_id, part=PARTS, page_token=token)
                self.calls += 1
                await self.quota.charge(self.poller.list_cost)  # a refused call costs quota too
                self._connected_at = self.quota.clock()
                call = stream_list(request, metadata=self._metadata)
                delivered = False
                try:
                    async for response in call:
                        delivered = True
                        items = [rest_item(message) for message in response.items]
                        comments, ended = parse_messages(items)
                        yield [*comments, *parse_moderation(items)]
                        if response.next_page_token:
                            token = response.next_page_token
                            await self.poller.state.put(token_key, token)
                        if ended or response.offline_at:
                            self._end("offline" if response.offline_at else "chat_ended")
                            return
                    why = "stream_closed"
                except grpc.aio.AioRpcError as error:
                    why = self._after_error(error)
                    if why is None:
                        return
                finally:
                    call.cancel()
                failures = 0 if delivered else failures + 1
                self._delivered = self._delivered or delivered
                if self._unreachable(why, failures):
                    return
                await self._reconnect_pause(why, failures)
        finally:
            await channel.close()

    def _unreachable(self, why: str, failures: int) -> bool:
        """An endpoint never reached this run (gRPC blocked on the way, say) is given up for polling over HTTPS."""
        if self._delivered or failures < self.unreachable_after or why not in _UNREACHABLE:
            return False
        self._announce("poll", f"{why}: streamList unreachable after {failures} attempts")
        return True

    def _end(self, reason: str) -> None:
        self.end_reason = reason
        log.info("youtube.chat_ended", video_id=self.poller.video_id, reason=reason, transport="stream")

    def _after_error(self, error: grpc.aio.AioRpcError) -> str | None:
        """What a failed call means: the back-off reason to retry with, or None when the stream is over
        (the chat ended, or the endpoint refused streaming and polling takes over)."""
        code, reason = error.code(), _reason(error)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            raise YouTubeError(
                f"YouTube refused the credential for streamList ({code.name}): check {self.poller.credential_setting}"
            )
        if reason in _END_REASONS or code == grpc.StatusCode.NOT_FOUND:
            self._end(reason or "liveChatNotFound")
            return None
        if reason in _QUOTA_REASONS or code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return f"quota:{reason or code.name}"
        if code in _REFUSED:
            self._announce("poll", f"{code.name}: {error.details() or ''}".strip().rstrip(":"))
            return None
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise YouTubeError(f"streamList rejected the request ({code.name}: {error.details()})")
        log.warning("youtube.stream_error", code=code.name, details=(error.details() or "")[:200])
        return code.name

    async def _reconnect_pause(self, why: str, failures: int) -> None:
        """Exponential after failed connections; after a stream that delivered, just ``reconnect_s``;
        and never sooner than the daily budget allows after the last connect."""
        first = self.poller.backoff_s if why.startswith("quota:") else self.reconnect_s
        seconds = min(self.poller.max_backoff_s, first * (2 ** max(0, failures - 1)))
        budget = await self.quota.min_interval(self.poller.list_cost)
        if math.isfinite(budget) and self._connected_at is not None:
            seconds = max(seconds, budget - (self.quota.clock() - self._connected_at))
        log.info("youtube.reconnect", reason=why, seconds=seconds, failures=failures)
        await self._pause(f"reconnect:{why}", seconds)

    async def _quota_allows(self) -> bool:
        """False (after waiting for the quota day to reset) when no call is left in today's budget."""
        if math.isinf(await self.quota.min_interval(self.poller.list_cost)):
            await self._pause("quota_reset", self.quota.seconds_to_reset())
            return False
        return True

    async def _pause(self, why: str, seconds: float) -> None:
        self.waits.append((why, seconds))
        await self.poller.sleep(seconds)
