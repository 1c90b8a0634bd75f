"""An in-process gRPC server that answers ``liveChatMessages.streamList`` as YouTube's reference describes it.

``youtube.api.v3.V3DataLiveChatMessageService/StreamList`` (the messages of
``services/ingest/stream_list.proto``): on connect, the chat's history after the request's
``page_token`` in responses of up to ``page_size`` messages, oldest first; then each message
``post``-ed while the call lasts, pushed at once; every response carries ``next_page_token``.
Token ``s<n>`` means "after the chat's first n messages", so a client that resumes with the last
token it received gets exactly what it has not seen. ``end()`` sends ``offline_at`` and closes the
call, as the real endpoint does when the stream goes offline.

Scripted failures: ``refuse`` (a status code every call gets at once, e.g. ``UNIMPLEMENTED``),
``errors`` (status code and message for the next calls, one each) and ``drops`` (for the next
calls, the number of responses after which the server drops the connection, ``UNAVAILABLE``).
Messages are given in the REST resource's JSON shape (the helpers of ``youtube_server``) and
converted to the proto; every call is recorded with its request and metadata, and every posted
message with the ``time.perf_counter()`` at which it was offered.
"""

from __future__ import annotations

import asyncio
import copy
import re
import time
from collections import deque
from typing import Any

import grpc
from google.protobuf import json_format

from kotae.services.ingest import stream_list_pb2 as pb


def _upper_snake(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).upper()


def proto_item(item: dict[str, Any]) -> pb.LiveChatMessage:
    """A REST-shaped ``liveChatMessage`` as the proto the stream sends (enums in their proto spelling)."""
    item = copy.deepcopy(item)
    snippet = item.get("snippet") or {}
    if snippet.get("type"):
        snippet["type"] = _upper_snake(snippet["type"])
    banned = snippet.get("userBannedDetails") or {}
    if banned.get("banType"):
        banned["banType"] = banned["banType"].upper()
    return json_format.ParseDict(item, pb.LiveChatMessage(), ignore_unknown_fields=True)


class FakeStreamList:
    """``async with FakeStreamList(history) as server:`` then ``server.target`` for the client."""

    def __init__(self, history: list[dict[str, Any]] | None = None, *, page_size: int = 2) -> None:
        self.items: list[dict[str, Any]] = []
        self.offered_at: dict[str, float] = {}
        self.page_size = page_size
        self.refuse: grpc.StatusCode | None = None
        self.errors: deque[tuple[grpc.StatusCode, str]] = deque()
        self.drops: deque[int] = deque()
        self.calls: list[dict[str, Any]] = []
        self.offline_at: str | None = None
        self._changed = asyncio.Condition()
        self._server: grpc.aio.Server | None = None
        self.port = 0
        self._add(history or [])

    def _add(self, items: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        for item in items:
            self.items.append(item)
            self.offered_at[str(item["id"])] = now

    async def post(self, *items: dict[str, Any]) -> None:
        """Messages posted to the chat now: pushed to every open call."""
        async with self._changed:
            self._add(list(items))
            self._changed.notify_all()

    async def end(self, offline_at: str = "2026-11-30T12:00:00Z") -> None:
        """The stream goes offline: open calls get ``offline_at`` and close."""
        async with self._changed:
            self.offline_at = offline_at
            self._changed.notify_all()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _response(self, start: int, end: int) -> pb.LiveChatMessageListResponse:
        return pb.LiveChatMessageListResponse(
            kind="youtube#liveChatMessageListResponse",
            etag=f"s{end}",
            next_page_token=f"s{end}",
            items=[proto_item(item) for item in self.items[start:end]],
        )

    async def _stream_list(self, request: pb.LiveChatMessageListRequest, context: grpc.aio.ServicerContext) -> Any:
        metadata = {key: value for key, value in context.invocation_metadata() or ()}
        self.calls.append({"request": request, "metadata": metadata})
        if not (metadata.get("x-goog-api-key") or metadata.get("authorization")):
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "Request is missing required authentication credential."
            )
        if self.refuse is not None:
            await context.abort(self.refuse, "The caller does not have permission to stream this chat.")
        if self.errors:
            code, message = self.errors.popleft()
            await context.abort(code, message)
        drop_after = self.drops.popleft() if self.drops else None
        token = request.page_token if request.HasField("page_token") else ""
        sent = int(token[1:]) if token.startswith("s") else 0
        responses = 0
        while True:
            upto = await self._wait_past(sent)
            if upto == sent and self.offline_at is not None:
                response = self._response(sent, sent)
                response.offline_at = self.offline_at
                yield response
                return
            while sent < upto:
                if drop_after is not None and responses >= drop_after:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "Connection reset by peer")
                end = min(upto, sent + self.page_size)
                yield self._response(sent, end)
                sent, responses = end, responses + 1

    async def _wait_past(self, sent: int) -> int:
        """How many messages the chat has, once it has more than ``sent`` (or has gone offline)."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.items) > sent or self.offline_at is not None)
            return len(self.items)

    async def __aenter__(self) -> FakeStreamList:
        server = grpc.aio.server()
        handler = grpc.unary_stream_rpc_method_handler(
            self._stream_list,
            request_deserializer=pb.LiveChatMessageListRequest.FromString,
            response_serializer=pb.LiveChatMessageListResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "youtube.api.v3.V3DataLiveChatMessageService", {"StreamList": handler}
                ),
            )
        )
        self.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._server = server
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            await self._server.stop(grace=0)
