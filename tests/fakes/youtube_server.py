"""A local HTTP server that answers like the YouTube Data API v3 live chat.

``videos?part=liveStreamingDetails&id=…`` gives the video's ``activeLiveChatId``
(none once the stream is over); ``liveChat/messages`` serves scripted pages in
the API's own shape: ``items`` of ``youtube#liveChatMessage``, ``nextPageToken``,
``pollingIntervalMillis``, ``offlineAt`` on the last page of an ended chat.
Page *i* is served for token ``p<i>`` (page 0 without a token) and points at
``p<i+1>``; past the last page the chat is idle (no items, same token).
``errors`` scripts error replies for the next list calls: ``quotaExceeded``,
``rateLimitExceeded``, ``liveChatEnded``, ``keyInvalid`` or ``500``. Every
request is recorded with its query and headers.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_ERRORS = {
    "quotaExceeded": (403, "youtube.quota", "The request cannot be completed because you have exceeded your quota."),
    "rateLimitExceeded": (403, "youtube.quota", "The request was sent too quickly."),
    "liveChatEnded": (403, "youtube.liveChat", "The live chat is no longer live."),
    "liveChatNotFound": (404, "youtube.liveChat", "The live chat that you are trying to retrieve cannot be found."),
    "keyInvalid": (400, "usageLimits", "API key not valid. Please pass a valid API key."),
    "500": (500, "global", "Backend Error"),
}


def text_message(
    msg_id: str,
    text: str,
    *,
    channel: str = "UCaaaaaaaaaaaaaaaaaaaaaa",
    name: str = "viewer",
    at: str = "2026-11-30T11:00:00Z",
) -> dict[str, Any]:
    return {
        "kind": "youtube#liveChatMessage",
        "etag": f"e-{msg_id}",
        "id": msg_id,
        "snippet": {
            "type": "textMessageEvent",
            "liveChatId": "chat-1",
            "authorChannelId": channel,
            "publishedAt": at,
            "hasDisplayContent": True,
            "displayMessage": text,
            "textMessageDetails": {"messageText": text},
        },
        "authorDetails": {
            "channelId": channel,
            "channelUrl": f"http://www.youtube.com/channel/{channel}",
            "displayName": name,
            "profileImageUrl": "https://yt3.example/photo.jpg",
            "isVerified": False,
            "isChatOwner": False,
            "isChatSponsor": False,
            "isChatModerator": False,
        },
    }


def superchat_message(
    msg_id: str,
    text: str,
    *,
    micros: int,
    currency: str,
    display: str,
    channel: str = "UCbbbbbbbbbbbbbbbbbbbbbb",
    at: str = "2026-11-30T11:00:00Z",
) -> dict[str, Any]:
    item = text_message(msg_id, text, channel=channel, name="patron", at=at)
    snippet = item["snippet"]
    del snippet["textMessageDetails"]
    snippet["type"] = "superChatEvent"
    snippet["displayMessage"] = f"{display} from patron: {text}"
    snippet["superChatDetails"] = {
        "amountMicros": str(micros),
        "currency": currency,
        "amountDisplayString": display,
        "userComment": text,
        "tier": 2,
    }
    return item


def membership_message(
    msg_id: str,
    kind: str,
    *,
    name: str = "新人",
    channel: str = "UCmmmmmmmmmmmmmmmmmmmmmm",
    comment: str | None = None,
    at: str = "2026-11-30T11:00:20Z",
) -> dict[str, Any]:
    """A membership event as the API sends it: ``newSponsorEvent``, ``memberMilestoneChatEvent`` (with
    ``comment`` as its ``userComment``), ``membershipGiftingEvent`` or ``giftMembershipReceivedEvent``."""
    item = text_message(msg_id, "", channel=channel, name=name, at=at)
    snippet = item["snippet"]
    del snippet["textMessageDetails"]
    snippet["type"] = kind
    item["authorDetails"]["isChatSponsor"] = kind != "membershipGiftingEvent"
    if kind == "newSponsorEvent":
        snippet["displayMessage"] = "Welcome to 常連!"
        snippet["newSponsorDetails"] = {"memberLevelName": "常連", "isUpgrade": False}
    elif kind == "memberMilestoneChatEvent":
        snippet["displayMessage"] = comment or ""
        snippet["memberMilestoneChatDetails"] = {"memberLevelName": "常連", "memberMonth": 6}
        if comment:
            snippet["memberMilestoneChatDetails"]["userComment"] = comment
    elif kind == "membershipGiftingEvent":
        snippet["displayMessage"] = "gifted 5 memberships"
        snippet["membershipGiftingDetails"] = {"giftMembershipsCount": 5, "giftMembershipsLevelName": "常連"}
    else:
        snippet["displayMessage"] = "received a gift membership"
        snippet["giftMembershipReceivedDetails"] = {
            "memberLevelName": "常連",
            "gifterChannelId": "UCgggggggggggggggggggggg",
            "associatedMembershipGiftingMessageId": "g1",
        }
    return item


def message_deleted(msg_id: str, deleted_id: str, *, at: str = "2026-11-30T11:00:30Z") -> dict[str, Any]:
    """A moderator deleted message ``deleted_id``: ``messageDeletedEvent`` with ``messageDeletedDetails``."""
    return {
        "kind": "youtube#liveChatMessage",
        "id": msg_id,
        "snippet": {
            "type": "messageDeletedEvent",
            "liveChatId": "chat-1",
            "publishedAt": at,
            "hasDisplayContent": False,
            "messageDeletedDetails": {"deletedMessageId": deleted_id},
        },
    }


def user_banned(
    msg_id: str, channel: str, *, name: str = "troll", duration_s: int | None = None, at: str = "2026-11-30T11:00:40Z"
) -> dict[str, Any]:
    """A moderator banned a viewer: ``userBannedEvent`` with ``userBannedDetails`` (temporary with a duration)."""
    details: dict[str, Any] = {
        "bannedUserDetails": {
            "channelId": channel,
            "channelUrl": f"http://www.youtube.com/channel/{channel}",
            "displayName": name,
            "profileImageUrl": "https://yt3.example/photo.jpg",
        },
        "banType": "temporary" if duration_s else "permanent",
    }
    if duration_s:
        details["banDurationSeconds"] = duration_s
    return {
        "kind": "youtube#liveChatMessage",
        "id": msg_id,
        "snippet": {
            "type": "userBannedEvent",
            "liveChatId": "chat-1",
            "publishedAt": at,
            "hasDisplayContent": False,
            "userBannedDetails": details,
        },
    }


def event(msg_id: str, kind: str) -> dict[str, Any]:
    """A non-text event such as ``chatEndedEvent`` or ``newSponsorEvent``."""
    return {
        "kind": "youtube#liveChatMessage",
        "id": msg_id,
        "snippet": {"type": kind, "liveChatId": "chat-1", "hasDisplayContent": False},
    }


class FakeYouTubeServer:
    def __init__(
        self,
        pages: list[dict[str, Any]],
        *,
        video_id: str = "vid-1",
        chat_id: str | None = "chat-1",
        ended_at: str | None = None,
    ) -> None:
        self.pages = pages
        self.video_id = video_id
        self.chat_id = chat_id
        self.ended_at = ended_at
        self.errors: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                server.requests.append({"path": url.path, "query": query, "headers": dict(self.headers)})
                if not (self.headers.get("X-goog-api-key") or self.headers.get("Authorization")):
                    return self._error("forbidden")
                if url.path.endswith("/videos"):
                    return self._send(200, server._video(query.get("id")))
                if url.path.endswith("/liveChat/messages"):
                    if server.errors:
                        return self._error(server.errors.popleft())
                    if query.get("liveChatId") != server.chat_id:
                        return self._error("liveChatNotFound")
                    return self._send(200, server._page(query.get("pageToken")))
                self._send(404, {"error": {"code": 404, "message": "Not Found", "errors": []}})

            def _error(self, reason: str) -> None:
                status, domain, message = _ERRORS.get(reason, (403, "youtube", reason))
                reason = "backendError" if reason == "500" else reason
                self._send(
                    status,
                    {
                        "error": {
                            "code": status,
                            "message": message,
                            "errors": [{"message": message, "domain": domain, "reason": reason}],
                        }
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=UTF-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _video(self, video_id: str | None) -> dict[str, Any]:
        if video_id != self.video_id:
            return {
                "kind": "youtube#videoListResponse",
                "items": [],
                "pageInfo": {"totalResults": 0, "resultsPerPage": 0},
            }
        details: dict[str, Any] = {"actualStartTime": "2026-11-30T11:00:00Z", "concurrentViewers": "120"}
        if self.chat_id:
            details["activeLiveChatId"] = self.chat_id
        if self.ended_at:
            details["actualEndTime"] = self.ended_at
        return {
            "kind": "youtube#videoListResponse",
            "items": [{"kind": "youtube#video", "id": self.video_id, "liveStreamingDetails": details}],
            "pageInfo": {"totalResults": 1, "resultsPerPage": 1},
        }

    def _page(self, token: str | None) -> dict[str, Any]:
        index = int(token[1:]) if token and token.startswith("p") else 0
        body: dict[str, Any] = {"kind": "youtube#liveChatMessageListResponse", "etag": f"page-{index}"}
        if index >= len(self.pages):  # idle chat: nothing new, same token
            body.update(items=[], nextPageToken=f"p{index}", pollingIntervalMillis=1000)
        else:
            page = self.pages[index]
            body.update(
                items=page.get("items", []),
                nextPageToken=f"p{index + 1}",
                pollingIntervalMillis=page.get("pollingIntervalMillis", 1000),
            )
            if page.get("offlineAt"):
                body["offlineAt"] = page["offlineAt"]
        body["pageInfo"] = {"totalResults": len(body["items"]), "resultsPerPage": len(body["items"])}
        return body

    @property
    def list_calls(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/liveChat/messages")]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/youtube/v3"

    def __enter__(self) -> FakeYouTubeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
