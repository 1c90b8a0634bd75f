"""A local WebSocket server that speaks like OneComme's ``/sub`` feed.

On connect it sends ``{"type": "connected", "data": {"comments": backlog}}``,
then each scripted frame in turn (``{"type": "comments", "data": {"comments": [...]}}``
or anything else a test wants to send), then closes the connection.
"""

from __future__ import annotations

import json
from typing import Any

from websockets.asyncio.server import ServerConnection, serve


def onecomme_comment(
    comment_id: str,
    text: str,
    *,
    user: str = "UCcccccccccccccccccccccc",
    name: str = "viewer",
    timestamp_ms: int = 1_796_036_400_000,
    service: str = "youtube",
    **extra: Any,
) -> dict[str, Any]:
    """One entry of ``data.comments``: the frame wraps OneComme's connection, ``data`` the comment."""
    data = {
        "id": comment_id,
        "liveId": "live-1",
        "userId": user,
        "name": name,
        "displayName": name,
        "isFirstTime": False,
        "isOwner": False,
        "hasGift": False,
        "profileImage": "https://example.invalid/p.png",
        "originalProfileImage": "https://example.invalid/p.png",
        "badges": [],
        "timestamp": timestamp_ms,
        "comment": text,
    }
    data.update(extra)
    return {
        "id": "frame-1",
        "service": service,
        "name": "配信枠",
        "url": "https://www.youtube.com/watch?v=vid-1",
        "color": {"r": 0, "g": 0, "b": 0},
        "data": data,
    }


def comments_frame(*comments: dict[str, Any]) -> str:
    return json.dumps({"type": "comments", "data": {"comments": list(comments)}}, ensure_ascii=False)


def deleted_frame(*comments: dict[str, Any] | str) -> str:
    """OneComme's ``deleted`` frame: the comments a moderator (or the streamer) removed."""
    return json.dumps({"type": "deleted", "data": list(comments)}, ensure_ascii=False)


class FakeOneComme:
    def __init__(self, frames: list[str], *, backlog: list[dict[str, Any]] | None = None) -> None:
        self.frames = frames
        self.backlog = backlog or []
        self.connections = 0
        self._server: Any = None

    async def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        await ws.send(json.dumps({"type": "connected", "data": {"comments": self.backlog}}, ensure_ascii=False))
        for frame in self.frames:
            await ws.send(frame)
        await ws.close()

    @property
    def url(self) -> str:
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}/sub"

    async def __aenter__(self) -> FakeOneComme:
        self._server = await serve(self._handle, "127.0.0.1", 0).__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()
