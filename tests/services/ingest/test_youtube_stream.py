"""kotae.services.ingest.youtube_stream: streamList against an in-process gRPC server in the reference's shape."""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from pydantic import SecretStr

from kotae.contracts import ModerationV1, SuperChat, subjects
from kotae.services.ingest.live import run_live
from kotae.services.ingest.state import KvState, MemoryState
from kotae.services.ingest.youtube import (
    QUOTA_TZ,
    YouTubeError,
    YouTubeLiveChat,
    parse_messages,
    parse_moderation,
)
from kotae.services.ingest.youtube_stream import STREAM_LIST, YouTubeChatStream
from kotae.settings import Settings
from tests.factories import read_all, stored
from tests.fakes.youtube_server import (
    FakeYouTubeServer,
    event,
    membership_message,
    message_deleted,
    superchat_message,
    text_message,
    user_banned,
)
from tests.fakes.youtube_stream_server import FakeStreamList

KEY = "AIza-stream-key-never-logged"
MORNING = datetime(2026, 11, 30, 8, 0, tzinfo=QUOTA_TZ).timestamp()


class FakeTime:
    """A clock that only moves when the reader pauses: back-offs are recorded, never waited for."""

    def __init__(self) -> None:
        self.now = MORNING

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def reader(
    http: FakeYouTubeServer,
    stream: FakeStreamList,
    *,
    state: Any = None,
    t: FakeTime | None = None,
    events: list[tuple[str, str | None]] | None = None,
    **options: Any,
) -> YouTubeChatStream:
    t = t or FakeTime()
    poller = YouTubeLiveChat(
        http.video_id,
        state=state or MemoryState(),
        base_url=http.url,
        api_key=KEY,
        sleep=t.sleep,
        clock=t.clock,
        min_poll_s=0.0,
        quota_per_day=options.pop("quota_per_day", 10_000_000),
        backoff_s=options.pop("backoff_s", 30.0),
        max_backoff_s=options.pop("max_backoff_s", 900.0),
    )
    on_transport = (lambda name, reason: events.append((name, reason))) if events is not None else None
    return YouTubeChatStream(poller, target=stream.target, on_transport=on_transport, **options)


def ids(pages: list[list[Any]]) -> list[str]:
    return [item.id for page in pages for item in page]


def questions(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [text_message(f"m{i}", f"質問{i}はいつ？") for i in range(start, start + n)]


async def test_history_on_connect_then_each_posted_message_as_it_comes() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(3), page_size=2) as stream:
            chat = reader(http, stream)
            pages: list[list[Any]] = []
            async for page in chat.pages():
                pages.append(page)
                if len(pages) == 2:  # the history came in two responses; now the chat goes on
                    await stream.post(text_message("m3", "期日前投票はいつから？"))
                elif len(pages) == 3:
                    await stream.post(*questions(2, start=4))
                elif len(pages) == 4:
                    await stream.end()
    assert [[c.id for c in p] for p in pages] == [["m0", "m1"], ["m2"], ["m3"], ["m4", "m5"], []]
    assert chat.transport == "stream" and chat.end_reason == "offline"
    assert len(stream.calls) == 1  # one call for the whole chat
    assert chat.quota.used == 1 + 5  # videos.list, then one streamList call
    call = stream.calls[0]
    assert call["metadata"]["x-goog-api-key"] == KEY  # the key travels as metadata …
    assert KEY not in str(call["request"]) and KEY not in repr(chat)  # … never in the request
    assert list(call["request"].part) == ["id", "snippet", "authorDetails"]
    assert call["request"].live_chat_id == "chat-1" and not call["request"].HasField("page_token")


async def test_an_oauth_token_is_sent_as_bearer_metadata() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(1)) as stream:
            await stream.end()
            poller = YouTubeLiveChat(http.video_id, state=MemoryState(), base_url=http.url, oauth_token="ya29.tok")
            chat = YouTubeChatStream(poller, target=stream.target)
            assert ids([p async for p in chat.pages()]) == ["m0"]
    assert stream.calls[0]["metadata"]["authorization"] == "Bearer ya29.tok"
    assert "x-goog-api-key" not in stream.calls[0]["metadata"]


async def test_a_dropped_connection_resumes_from_the_last_token_with_nothing_lost_or_repeated() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(5), page_size=2) as stream:
            stream.drops.append(1)  # the first connection dies after its first response
            chat = reader(http, stream, reconnect_s=0.5)
            pages: list[list[Any]] = []
            async for page in chat.pages():
                pages.append(page)
                if ids(pages) == [f"m{i}" for i in range(5)]:
                    await stream.post(text_message("m5", "保育料は？"))
                if "m5" in ids(pages):
                    await stream.end()
    assert ids(pages) == ["m0", "m1", "m2", "m3", "m4", "m5"]
    tokens = [c["request"].page_token for c in stream.calls]
    assert tokens == ["", "s2"]  # the second call resumed right after the last response received
    assert chat.waits == [("reconnect:UNAVAILABLE", 0.5)]  # a stream that had delivered: a short pause
    assert chat.quota.used == 1 + 2 * 5


async def test_a_restarted_reader_resumes_from_the_stored_token() -> None:
    state = MemoryState()
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(3), page_size=1) as stream:
            first = reader(http, stream, state=state)
            taken = []
            async for page in first.pages():
                taken.append(page)
                if len(taken) == 2:
                    break  # the process stops while it holds the second page …
            await first.aclose()
            await stream.post(text_message("m3", "バス代はいくら？"))
            await stream.end()
            second = reader(http, stream, state=state)  # … and a new one starts with the same state
            pages = [p async for p in second.pages()]
    assert ids(taken) == ["m0", "m1"]
    # Only the page it held is read again (the bus stores it once, as a resend); the history before is not.
    assert ids(pages) == ["m1", "m2", "m3"]
    assert stream.calls[-1]["request"].page_token == "s1"


async def test_failed_connections_back_off_exponentially_and_quota_errors_from_the_quota_back_off() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(2)) as stream:
            stream.errors.extend(
                [
                    (grpc.StatusCode.UNAVAILABLE, "upstream connect error"),
                    (grpc.StatusCode.UNAVAILABLE, "upstream connect error"),
                    (grpc.StatusCode.UNAVAILABLE, "upstream connect error"),
                ]
            )
            await stream.end()
            chat = reader(http, stream, reconnect_s=1.0, max_backoff_s=3.0, unreachable_after=5)
            assert ids([p async for p in chat.pages()]) == ["m0", "m1"]
        async with FakeStreamList(questions(1)) as stream:
            stream.errors.append((grpc.StatusCode.RESOURCE_EXHAUSTED, "quotaExceeded: The request cannot be completed"))
            await stream.end()
            quota_chat = reader(http, stream, backoff_s=30.0)
            assert ids([p async for p in quota_chat.pages()]) == ["m0"]
    assert chat.waits == [
        ("reconnect:UNAVAILABLE", 1.0),
        ("reconnect:UNAVAILABLE", 2.0),
        ("reconnect:UNAVAILABLE", 3.0),
    ]
    assert quota_chat.waits == [("reconnect:quota:quotaExceeded", 30.0)]
    assert chat.quota.used == 1 + 4 * 5  # every call costs its units, refused or not


async def test_reconnecting_never_outruns_the_daily_budget() -> None:
    t = FakeTime()
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(1)) as stream:
            stream.drops.append(1)
            # 16 hours left in the quota day, 101 units: 1 for the video, then 20 calls, one per 48 minutes.
            chat = reader(http, stream, t=t, quota_per_day=101, reconnect_s=1.0)
            async for page in chat.pages():
                if ids([page]) == ["m0"]:
                    await stream.post(text_message("m1", "q?"))
                else:
                    await stream.end()
    (why, seconds), *_ = chat.waits
    assert why == "reconnect:UNAVAILABLE" and seconds == pytest.approx(16 * 3600 / 19, rel=0.01)


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.FAILED_PRECONDITION],
)
async def test_a_refused_stream_falls_back_to_polling_and_says_so(code: grpc.StatusCode) -> None:
    polled = [
        {"items": [text_message("m1", "保育料っていくら？")], "pollingIntervalMillis": 2000},
        {"items": [text_message("m2", "バス代は？")], "offlineAt": "2026-11-30T12:00:00Z"},
    ]
    events: list[tuple[str, str | None]] = []
    with FakeYouTubeServer(polled) as http:
        async with FakeStreamList(questions(3)) as stream:
            stream.refuse = code
            chat = reader(http, stream, events=events)
            pages = [p async for p in chat.pages()]
    assert ids(pages) == ["m1", "m2"]
    assert chat.transport == "poll" and chat.end_reason == "offline"
    assert [name for name, _ in events] == ["stream", "poll"] and events[1][1].startswith(code.name)
    assert len(stream.calls) == 1 and len(http.list_calls) == 2  # asked once, then polled
    assert [why for why, _ in chat.poller.waits] == ["polling_interval"]
    assert chat.quota.used == 1 + 5 + 2 * 5  # one quota for both transports
    assert all(r["headers"].get("X-goog-api-key") == KEY for r in http.list_calls)


async def test_an_endpoint_never_reached_is_given_up_for_polling() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    polled = [{"items": [text_message("m1", "保育料は？")], "offlineAt": "2026-11-30T12:00:00Z"}]
    events: list[tuple[str, str | None]] = []
    with FakeYouTubeServer(polled) as http:
        t = FakeTime()
        poller = YouTubeLiveChat(
            http.video_id,
            state=MemoryState(),
            base_url=http.url,
            api_key=KEY,
            sleep=t.sleep,
            clock=t.clock,
            quota_per_day=10_000_000,
        )
        chat = YouTubeChatStream(
            poller, target=f"127.0.0.1:{closed}", on_transport=lambda *e: events.append(e), reconnect_s=1.0
        )
        assert ids([p async for p in chat.pages()]) == ["m1"]
    assert chat.waits == [("reconnect:UNAVAILABLE", 1.0), ("reconnect:UNAVAILABLE", 2.0)] and chat.calls == 3
    assert events[-1][0] == "poll" and "unreachable after 3 attempts" in events[-1][1]
    assert chat.transport == "poll" and chat.end_reason == "offline"


async def test_offline_at_ends_the_stream_without_reconnecting() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(2), page_size=5) as stream:
            chat = reader(http, stream)
            pages: list[list[Any]] = []
            async for page in chat.pages():
                pages.append(page)
                await stream.end("2026-11-30T12:34:56Z")
            await asyncio.sleep(0.05)
    assert [len(p) for p in pages] == [2, 0] and chat.end_reason == "offline"
    assert len(stream.calls) == 1 and chat.waits == []


@pytest.mark.parametrize(
    ("code", "details", "reason"),
    [
        (
            grpc.StatusCode.NOT_FOUND,
            "The live chat that you are trying to retrieve cannot be found.",
            "liveChatNotFound",
        ),
        (grpc.StatusCode.PERMISSION_DENIED, "liveChatEnded: The live chat is no longer live.", "liveChatEnded"),
    ],
)
async def test_a_chat_that_is_gone_ends_the_run(code: grpc.StatusCode, details: str, reason: str) -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(1)) as stream:
            stream.errors.append((code, details))
            chat = reader(http, stream)
            assert [p async for p in chat.pages()] == []
    assert chat.end_reason == reason and chat.transport == "stream" and http.list_calls == []


async def test_a_rejected_credential_stops_with_the_setting_named() -> None:
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(questions(1)) as stream:
            stream.errors.append((grpc.StatusCode.UNAUTHENTICATED, "API key not valid."))
            chat = reader(http, stream)
            with pytest.raises(YouTubeError, match="KOTAE_YOUTUBE_API_KEY"):
                _ = [p async for p in chat.pages()]


async def test_every_event_kind_reads_as_the_poller_reads_it() -> None:
    troll = "UC" + "t" * 22
    member = text_message("m2", "メンバーです、保育料は？")
    member["authorDetails"]["isChatSponsor"] = True
    sticker = event("m4", "superStickerEvent")
    sticker["snippet"]["superStickerDetails"] = {
        "amountMicros": "300000000",
        "currency": "JPY",
        "amountDisplayString": "¥300",
        "tier": 1,
        "superStickerMetadata": {"stickerId": "cat", "altText": "猫", "altTextLanguage": "ja"},
    }
    milestone = event("m5", "memberMilestoneChatEvent")
    milestone["snippet"]["memberMilestoneChatDetails"] = {"memberLevelName": "常連", "memberMonth": 6}
    items = [
        text_message("m1", "期日前投票はいつから？", name="Aki", at="2026-11-30T11:00:05.123Z"),
        member,
        superchat_message("m3", "港の再開発はいくら？", micros=500_000_000, currency="JPY", display="¥500"),
        sticker,
        event("m6", "newSponsorEvent"),
        milestone,
        message_deleted("d1", "m1"),
        user_banned("b1", troll, name="troll"),
        user_banned("b2", troll, duration_s=300),
    ]
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(items, page_size=len(items)) as stream:
            await stream.end()
            chat = reader(http, stream)
            (page, _) = [p async for p in chat.pages()]
    comments, _ = parse_messages(items)
    assert page == [*comments, *parse_moderation(items)]  # the same comments and events, field for field
    assert [c.id for c in page] == ["m1", "m2", "m3", "m6", "m5", "d1", "b1", "b2"]
    assert page[2].superchat == SuperChat(amount=500.0, currency="JPY") and page[1].member
    assert [c.membership.kind for c in page[3:5]] == ["new_member", "milestone"]  # type: ignore[union-attr]
    assert page[4].membership.months == 6  # type: ignore[union-attr]  # a uint32 of the proto, read as a number
    assert (page[7].ban_type, page[7].ban_duration_s) == ("temporary", 300)


def test_the_method_path_is_the_published_one() -> None:
    assert STREAM_LIST == "/youtube.api.v3.V3DataLiveChatMessageService/StreamList"


# --- through a real nats-server -------------------------------------------------------------


def stream_settings(settings: Settings, http: FakeYouTubeServer, stream: FakeStreamList) -> Settings:
    return settings.model_copy(
        update={
            "youtube_base_url": http.url,
            "youtube_stream_target": stream.target,
            "youtube_api_key": SecretStr(KEY),
            "youtube_quota_per_day": 10_000_000,
            "author_salt": None,
        }
    )


async def test_streamed_messages_and_moderation_reach_the_bus_once(nats_url: str, settings: Settings) -> None:
    troll = "UC" + "t" * 22
    history = [text_message("m1", "保育料っていくら？", channel=troll, name="荒らし"), text_message("m2", "草")]
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(history, page_size=1) as stream:
            stream.drops.append(1)  # a disconnect in the middle: the bus still gets each message once
            s = stream_settings(settings, http, stream)
            t = FakeTime()

            def source(js: Any) -> Any:
                async def pages() -> Any:
                    state = await KvState.open(js, s.ingest_kv_bucket)
                    chat = YouTubeChatStream.from_settings(s, http.video_id, state, sleep=t.sleep, clock=t.clock)
                    async for page in chat.pages():
                        yield page
                        if any(c.id == "m2" for c in page):
                            await stream.post(message_deleted("d1", "m1"), user_banned("b1", troll))
                        if any(c.id == "b1" for c in page):
                            await stream.end()

                return pages()

            out = io.StringIO()
            await run_live(s, nats_url, source, source_name="youtube", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["comment_id"], line["status"]) for line in lines][:2] == [("m1", "admitted"), ("m2", "dropped")]
    assert [line["reason"] for line in lines[2:]] == ["message_deleted", "user_banned"]
    (comment,), answers = await stored(nats_url)
    assert comment.comment_id == "m1" and comment.author.startswith("ch_") and comment.source == "youtube"
    assert [a.comment_id for a in answers] == ["m2"]
    events = [ModerationV1.model_validate(m["data"]) for m in await read_all(nats_url, subjects.MODERATION_ALL)]
    assert [e.action for e in events] == ["message_deleted", "user_banned"]
    assert events[1].author == comment.author and troll not in events[1].model_dump_json()


async def test_a_streamed_membership_event_becomes_one_comment_and_a_milestones_words_are_asked(
    nats_url: str, settings: Settings
) -> None:
    history = [
        membership_message("n1", "newSponsorEvent", name="新人"),
        membership_message("g1", "membershipGiftingEvent", name="太っ腹"),
    ]
    with FakeYouTubeServer([]) as http:
        async with FakeStreamList(history, page_size=1) as stream:
            s = stream_settings(settings, http, stream)
            t = FakeTime()

            def source(js: Any) -> Any:
                async def pages() -> Any:
                    state = await KvState.open(js, s.ingest_kv_bucket)
                    chat = YouTubeChatStream.from_settings(s, http.video_id, state, sleep=t.sleep, clock=t.clock)
                    async for page in chat.pages():
                        yield page
                        if any(c.id == "g1" for c in page):  # pushed while the stream is open
                            await stream.post(
                                membership_message("k1", "memberMilestoneChatEvent", comment="保育料はいくらですか？")
                            )
                        if any(c.id == "k1" for c in page):
                            await stream.end()

                return pages()

            out = io.StringIO()
            await run_live(s, nats_url, source, source_name="youtube", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["comment_id"], line["status"]) for line in lines] == [
        ("n1", "dropped"),
        ("g1", "dropped"),
        ("k1", "admitted"),
    ]
    (asked,), answers = await stored(nats_url)
    assert [(a.comment_id, a.comment.membership.kind) for a in answers if a.comment.membership] == [
        ("n1", "new_member"),
        ("g1", "gift"),
    ]  # each event one thanks-only outcome, the member's display name kept for the thanks
    assert all(a.reason and a.reason.startswith("thanks_only") for a in answers)
    assert [a.comment.author_name for a in answers] == ["新人", "太っ腹"]
    assert asked.comment_id == "k1" and asked.text == "保育料はいくらですか？" and asked.membership is not None


async def test_kotae_ingest_youtube_says_which_transport_it_reads_by(nats_server: str, tmp_path: Path) -> None:
    polled = [{"items": [text_message("m9", "保育料は？")], "offlineAt": "2026-11-30T12:00:00Z"}]
    with FakeYouTubeServer(polled) as http:
        async with FakeStreamList([text_message("m1", "期日前投票はいつから？")]) as stream:
            await stream.end()
            base = {k: v for k, v in os.environ.items() if not k.startswith("KOTAE_")}
            base.update(
                KOTAE_NATS_URL=nats_server,
                KOTAE_AUTHOR_SALT="test-salt",
                KOTAE_YOUTUBE_BASE_URL=http.url,
                KOTAE_YOUTUBE_STREAM_TARGET=stream.target,
                KOTAE_YOUTUBE_API_KEY="AIza-secret",
                KOTAE_YOUTUBE_QUOTA_PER_DAY="10000000",
                KOTAE_YOUTUBE_MIN_POLL_S="0",
                KOTAE_LOG_LEVEL="debug",
            )
            runs = {}
            for name, extra in (("stream", []), ("poll", ["--transport", "poll"])):
                env = {**base, "KOTAE_DATA_DIR": str(tmp_path / name)}
                proc = await asyncio.create_subprocess_exec(
                    *(sys.executable, "-m", "kotae", "ingest", "youtube", "--video", http.video_id, *extra),
                    env=env,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                out, err = await asyncio.wait_for(proc.communicate(), 120)
                assert proc.returncode == 0, err.decode()
                runs[name] = ([json.loads(line)["comment_id"] for line in out.decode().splitlines()], err.decode())
    assert runs["stream"][0] == ["m1"] and "by streamList" in runs["stream"][1]
    assert runs["poll"][0] == ["m9"] and "by polling" in runs["poll"][1]
    assert "ended (offline)" in runs["stream"][1] and "ended (offline)" in runs["poll"][1]
    assert all("AIza-secret" not in err for _, err in runs.values())  # not even in debug logs
