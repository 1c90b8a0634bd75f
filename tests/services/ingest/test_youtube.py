"""kotae.services.ingest.youtube: the YouTube live chat poller, against a local server in the API's shape."""

from __future__ import annotations

import io
import json
from datetime import datetime
from typing import Any

import nats
import pytest
from pydantic import SecretStr

from kotae.contracts import ModerationV1, SuperChat, subjects
from kotae.services.ingest.live import run_live
from kotae.services.ingest.state import KvState, MemoryState
from kotae.services.ingest.youtube import (
    QUOTA_TZ,
    QuotaMeter,
    YouTubeError,
    YouTubeLiveChat,
    parse_messages,
    parse_moderation,
)
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

KEY = "AIza-test-key-never-logged"
# 08:00 Pacific: 16 hours before the quota day ends.
MORNING = datetime(2026, 11, 30, 8, 0, tzinfo=QUOTA_TZ).timestamp()


class FakeTime:
    """A clock that only moves when the poller sleeps: no wall-clock waits, no flaky thresholds."""

    def __init__(self, start: float = MORNING) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def chat(server: FakeYouTubeServer, state: Any = None, t: FakeTime | None = None, **options: Any) -> YouTubeLiveChat:
    t = t or FakeTime()
    options.setdefault("quota_per_day", 10_000_000)  # a budget that never binds, unless a test sets one
    return YouTubeLiveChat(
        server.video_id,
        state=state or MemoryState(),
        base_url=server.url,
        api_key=KEY,
        sleep=t.sleep,
        clock=t.clock,
        min_poll_s=0.0,
        **options,
    )


async def collect(poller: YouTubeLiveChat, limit: int = 50) -> list[list[Any]]:
    pages = []
    async for page in poller.pages():
        pages.append(page)
        if len(pages) >= limit:
            break
    return pages


def ended_chat() -> list[dict[str, Any]]:
    return [
        {
            "items": [text_message("m1", "保育料っていくらになるの？"), text_message("m2", "草")],
            "pollingIntervalMillis": 2000,
        },
        {
            "items": [
                superchat_message("m3", "港の再開発はいくら？", micros=500_000_000, currency="JPY", display="¥500")
            ],
            "pollingIntervalMillis": 6000,
        },
        {"items": [text_message("m4", "What time do the polls close?")], "pollingIntervalMillis": 3000},
        {"items": [event("m5", "chatEndedEvent")], "offlineAt": "2026-11-30T12:00:00Z"},
    ]


def test_text_messages_and_super_chats_become_comments() -> None:
    items = [
        text_message("m1", "hello?", channel="UC" + "x" * 22, name="Aki", at="2026-11-30T11:00:05.123Z"),
        superchat_message("m2", "", micros=1_990_000, currency="USD", display="$1.99"),
        event("m3", "newSponsorEvent"),
        {"id": "broken", "snippet": {"type": "superChatEvent", "superChatDetails": {"currency": "JPY"}}},
    ]
    comments, ended = parse_messages(items)
    assert not ended
    assert [c.id for c in comments] == ["m1", "m2", "m3"]  # the malformed item is skipped
    assert comments[2].membership is not None and comments[2].membership.kind == "new_member"
    assert comments[0].text == "hello?" and comments[0].author_id == "UC" + "x" * 22
    assert comments[1].superchat == SuperChat(amount=1.99, currency="USD")
    assert comments[1].text.startswith("$1.99")  # a Super Chat without words keeps its display message
    assert parse_messages([event("e", "chatEndedEvent")]) == ([], True)


def test_membership_events_become_comments_and_only_a_milestones_own_words_are_its_text() -> None:
    items = [
        membership_message("n1", "newSponsorEvent", name="新人"),
        membership_message("k1", "memberMilestoneChatEvent", name="常連さん", comment="保育料はいくらですか？"),
        membership_message("k2", "memberMilestoneChatEvent", name="無言"),
        membership_message("g1", "membershipGiftingEvent", name="太っ腹"),
        membership_message("r1", "giftMembershipReceivedEvent", name="もらった人"),
    ]
    comments, _ = parse_messages(items)
    by_id = {c.id: c for c in comments}
    assert list(by_id) == ["n1", "k1", "k2", "g1", "r1"]
    kinds = {i: (c.membership.kind, c.membership.with_message) for i, c in by_id.items() if c.membership}
    assert kinds == {
        "n1": ("new_member", False),
        "k1": ("milestone", True),
        "k2": ("milestone", False),
        "g1": ("gift", False),
        "r1": ("gift_received", False),
    }
    assert by_id["k1"].text == "保育料はいくらですか？" and by_id["k1"].membership.months == 6  # type: ignore[union-attr]
    assert by_id["g1"].membership.gifts == 5 and not by_id["g1"].member  # type: ignore[union-attr]
    assert by_id["n1"].member and by_id["n1"].author == "新人" and by_id["n1"].membership.level == "常連"  # type: ignore[union-attr]


async def test_pages_honour_the_polling_interval_and_stop_when_the_chat_ends() -> None:
    t = FakeTime()
    with FakeYouTubeServer(ended_chat()) as server:
        poller = chat(server, t=t)
        pages = await collect(poller)
    assert [[c.id for c in p] for p in pages] == [["m1", "m2"], ["m3"], ["m4"], []]
    assert poller.end_reason == "offline"
    # one pause after each page, as long as the API asked for: 2 s, 6 s, 3 s
    assert [w for why, w in poller.waits] == [2.0, 6.0, 3.0]
    assert [why for why, _ in poller.waits] == ["polling_interval"] * 3
    # each call carried the previous page's token
    assert [r["query"].get("pageToken") for r in server.list_calls] == [None, "p1", "p2", "p3"]


async def test_the_key_travels_in_a_header_never_in_a_url() -> None:
    with FakeYouTubeServer(ended_chat()) as server:
        poller = chat(server)
        await collect(poller)
    for request in server.requests:
        assert KEY not in json.dumps(request["query"])
        assert request["headers"].get("X-goog-api-key") == KEY
    assert KEY not in repr(poller)


async def test_an_oauth_token_is_sent_as_a_bearer_token() -> None:
    with FakeYouTubeServer(ended_chat()) as server:
        poller = YouTubeLiveChat(
            server.video_id, state=MemoryState(), base_url=server.url, oauth_token="ya29.tok", sleep=FakeTime().sleep
        )
        await collect(poller)
    assert all(r["headers"].get("Authorization") == "Bearer ya29.tok" for r in server.requests)


async def test_quota_exceeded_backs_off_exponentially_then_resumes_without_loss() -> None:
    t = FakeTime()
    with FakeYouTubeServer(ended_chat()) as server:
        server.errors.extend(["quotaExceeded", "rateLimitExceeded", "500"])
        poller = chat(server, t=t, backoff_s=10.0, max_backoff_s=25.0)
        pages = await collect(poller)
    backoffs = [(why, w) for why, w in poller.waits if why.startswith("backoff")]
    assert backoffs == [
        ("backoff:quotaExceeded", 10.0),
        ("backoff:rateLimitExceeded", 20.0),
        ("backoff:backendError", 25.0),
    ]
    assert [c.id for p in pages for c in p] == ["m1", "m2", "m3", "m4"]
    assert poller.end_reason == "offline"


async def test_every_call_is_counted_against_the_quota() -> None:
    state = MemoryState()
    with FakeYouTubeServer(ended_chat()) as server:
        poller = chat(server, state=state, list_cost=5, video_cost=1)
        await collect(poller)
    assert len(server.list_calls) == 4
    assert poller.quota.used == 1 + 4 * 5
    assert state.values["youtube.quota.2026-11-30"] == "21"  # kept for the next process


async def test_a_small_budget_slows_polling_down_instead_of_running_out() -> None:
    idle = [{"items": [text_message(f"m{i}", f"q{i}?")], "pollingIntervalMillis": 1000} for i in range(30)]
    t = FakeTime()
    with FakeYouTubeServer(idle) as server:
        # 16 hours left in the quota day, 101 units: 1 for the video, then 20 list calls at most.
        poller = chat(server, t=t, quota_per_day=101, list_cost=5)
        await collect(poller, limit=12)
    budget_waits = [w for why, w in poller.waits if why == "quota_budget"]
    assert budget_waits, "the poller must slow down when the API's interval would overspend the budget"
    assert all(w > 1.0 for w in budget_waits)  # longer than the API's own 1 s interval
    # spread over the rest of the day: the waits add up to no more than the time left, and the budget holds
    assert poller.quota.used <= 101
    assert sum(budget_waits) <= 16 * 3600


async def test_quota_meter_spreads_the_rest_of_the_day() -> None:
    t = FakeTime()
    meter = QuotaMeter(MemoryState(), 1000, clock=t.clock)
    first = await meter.min_interval(5)
    await meter.charge(500)
    later = await meter.min_interval(5)
    assert later == pytest.approx(2 * first)  # half the budget left for the same time: twice the pause
    await meter.charge(500)
    assert await meter.min_interval(5) == float("inf")


async def test_quota_can_be_spread_over_a_stream_of_known_length() -> None:
    t = FakeTime()
    whole_day = await QuotaMeter(MemoryState(), 1000, clock=t.clock).min_interval(5)
    two_hours = await QuotaMeter(MemoryState(), 1000, clock=t.clock, spread_s=2 * 3600).min_interval(5)
    assert two_hours == pytest.approx(2 * 3600 / 200)
    assert two_hours < whole_day


async def test_a_chat_that_ends_with_liveChatEnded_stops_cleanly() -> None:
    pages = [{"items": [text_message("m1", "q?")]}] * 3
    with FakeYouTubeServer(pages) as server:
        poller = chat(server)
        got = []
        async for page in poller.pages():
            got.append(page)
            server.errors.append("liveChatEnded")
    assert len(got) == 1 and poller.end_reason == "liveChatEnded"


@pytest.mark.parametrize(
    ("chat_id", "ended_at", "reason"),
    [(None, None, "no_active_live_chat"), (None, "2026-11-30T12:00:00Z", "stream_ended")],
)
async def test_a_video_without_an_active_chat_yields_nothing(
    chat_id: str | None, ended_at: str | None, reason: str
) -> None:
    with FakeYouTubeServer([], chat_id=chat_id, ended_at=ended_at) as server:
        poller = chat(server)
        assert await collect(poller) == []
    assert poller.end_reason == reason
    assert server.list_calls == []


async def test_an_unknown_video_yields_nothing() -> None:
    with FakeYouTubeServer([]) as server:
        poller = YouTubeLiveChat("other", state=MemoryState(), base_url=server.url, api_key=KEY, sleep=FakeTime().sleep)
        assert await collect(poller) == []
    assert poller.end_reason == "video_not_found"


async def test_an_invalid_key_stops_with_the_setting_named() -> None:
    with FakeYouTubeServer(ended_chat()) as server:
        server.errors.append("keyInvalid")
        poller = chat(server)
        with pytest.raises(YouTubeError, match="KOTAE_YOUTUBE_API_KEY"):
            await collect(poller)


def test_no_credential_names_both_settings() -> None:
    with pytest.raises(YouTubeError, match="KOTAE_YOUTUBE_API_KEY or KOTAE_YOUTUBE_OAUTH_TOKEN"):
        YouTubeLiveChat("v", state=MemoryState())


# --- through a real nats-server -------------------------------------------------------------


async def run_once(
    settings: Settings, url: str, server: FakeYouTubeServer, t: FakeTime
) -> tuple[YouTubeLiveChat, list[dict[str, Any]]]:
    pollers: list[YouTubeLiveChat] = []

    def source(js: Any) -> Any:
        async def pages() -> Any:
            state = await KvState.open(js, settings.ingest_kv_bucket)
            poller = YouTubeLiveChat.from_settings(settings, server.video_id, state, sleep=t.sleep, clock=t.clock)
            pollers.append(poller)
            async for page in poller.pages():
                yield page

        return pages()

    out = io.StringIO()
    await run_live(settings, url, source, source_name="youtube", out=out)
    return pollers[0], [json.loads(line) for line in out.getvalue().splitlines()]


def yt_settings(settings: Settings, server: FakeYouTubeServer) -> Settings:
    return settings.model_copy(
        update={
            "youtube_base_url": server.url,
            "youtube_api_key": SecretStr(KEY),
            "youtube_min_poll_s": 0.0,
            "youtube_quota_per_day": 10_000_000,
            "author_salt": None,
        }
    )


async def test_every_message_is_published_once_with_hashed_authors(nats_url: str, settings: Settings) -> None:
    with FakeYouTubeServer(ended_chat()) as server:
        s = yt_settings(settings, server)
        poller, lines = await run_once(s, nats_url, server, FakeTime())
    assert poller.end_reason == "offline"
    assert {line["comment_id"]: line["status"] for line in lines} == {
        "m1": "admitted",
        "m2": "dropped",
        "m3": "admitted",
        "m4": "admitted",
    }
    comments, answers = await stored(nats_url)
    assert sorted(c.comment_id for c in comments) == ["m1", "m3", "m4"]
    assert [a.comment_id for a in answers] == ["m2"] and answers[0].reason.startswith("not_a_question")
    paid = next(c for c in comments if c.comment_id == "m3")
    assert paid.superchat == SuperChat(amount=500.0, currency="JPY") and paid.source == "youtube"
    for c in comments:  # no channel id on the bus, only its salted hash
        assert c.author.startswith("ch_") and not c.author.startswith("UC")
        assert "UCaaaaaaaa" not in c.model_dump_json() and "UCbbbbbbbb" not in c.model_dump_json()


async def test_a_polled_membership_event_becomes_one_comment_thanked_and_a_milestone_question_is_asked(
    nats_url: str, settings: Settings
) -> None:
    pages = [
        {
            "items": [
                membership_message("n1", "newSponsorEvent", name="新人"),
                membership_message("k1", "memberMilestoneChatEvent", comment="保育料はいくらですか？"),
            ],
            "pollingIntervalMillis": 2000,
        },
        {"items": [event("end", "chatEndedEvent")], "offlineAt": "2026-11-30T12:00:00Z"},
    ]
    with FakeYouTubeServer(pages) as server:
        _, lines = await run_once(yt_settings(settings, server), nats_url, server, FakeTime())
    assert {line["comment_id"]: line["status"] for line in lines} == {"n1": "dropped", "k1": "admitted"}
    comments, answers = await stored(nats_url)
    (joined,) = answers  # one message on the bus for the event: the thanks-only outcome the on-air stage thanks
    assert joined.comment_id == "n1" and joined.reason and joined.reason.startswith("thanks_only")
    assert joined.comment.membership is not None and joined.comment.membership.kind == "new_member"
    assert joined.comment.author_name == "新人" and joined.comment.member
    (asked,) = comments
    assert asked.comment_id == "k1" and asked.membership is not None and asked.membership.with_message


async def test_a_restart_resumes_from_the_stored_page_token_without_duplicates(
    nats_url: str, settings: Settings
) -> None:
    chat_pages = [
        {"items": [text_message("m1", "保育料っていくら？")], "pollingIntervalMillis": 1000},
        {"items": [text_message("m2", "バス代はいくら？")], "pollingIntervalMillis": 1000},
    ]
    with FakeYouTubeServer(chat_pages) as server:
        s = yt_settings(settings, server)
        # First run: two pages, an idle one, then the chat id vanishes ('liveChatNotFound') and the process stops.
        t = FakeTime()
        server.pages = chat_pages + [{"items": []}]
        original_page = server._page

        def page_then_vanish(token: str | None) -> dict[str, Any]:
            body = original_page(token)
            if token == "p2":
                server.chat_id = "gone"
            return body

        server._page = page_then_vanish  # type: ignore[method-assign]
        poller1, lines1 = await run_once(s, nats_url, server, t)
        assert poller1.end_reason == "liveChatNotFound"
        assert [line["comment_id"] for line in lines1] == ["m1", "m2"]
        assert len(server.list_calls) == 4

        # The chat comes back with more messages; the second process starts from the saved token.
        server._page = original_page  # type: ignore[method-assign]
        server.chat_id = "chat-1"
        server.pages = chat_pages + [
            {"items": []},
            {"items": [text_message("m3", "期日前投票はいつから？")], "pollingIntervalMillis": 1000},
            {"items": [], "offlineAt": "2026-11-30T12:00:00Z"},
        ]
        calls_before = len(server.list_calls)
        poller2, lines2 = await run_once(s, nats_url, server, t)
    assert server.list_calls[calls_before]["query"].get("pageToken") == "p3"  # not from the start
    assert [line["comment_id"] for line in lines2] == ["m3"]
    comments, _ = await stored(nats_url)
    assert sorted(c.comment_id for c in comments) == ["m1", "m2", "m3"]  # each once


async def test_a_page_read_twice_after_a_crash_is_stored_once(nats_url: str, settings: Settings) -> None:
    with FakeYouTubeServer(ended_chat()) as server:
        s = yt_settings(settings, server)
        await run_once(s, nats_url, server, FakeTime())
        # A crash before the token was saved: the next process starts from the first page again.
        nc = await nats.connect(nats_url)
        kv = await nc.jetstream().key_value(s.ingest_kv_bucket)
        for key in await kv.keys():
            if key.startswith("youtube.page."):
                await kv.delete(key)
        await nc.close()
        _, lines = await run_once(s, nats_url, server, FakeTime())
    assert {line["comment_id"]: line["status"] for line in lines} == {
        "m1": "resend",
        "m2": "resend",
        "m3": "resend",
        "m4": "resend",
    }
    comments, answers = await stored(nats_url)
    assert sorted(c.comment_id for c in comments) == ["m1", "m3", "m4"] and [a.comment_id for a in answers] == ["m2"]


# --- moderation: deleted messages and banned viewers -----------------------------------------


def test_deleted_messages_and_banned_viewers_become_moderation_events_and_members_are_flagged() -> None:
    troll = "UC" + "t" * 22
    sponsor = text_message("m1", "保育料は？")
    sponsor["authorDetails"]["isChatSponsor"] = True
    items = [
        sponsor,
        message_deleted("d1", "m0"),
        user_banned("b1", troll, name="troll"),
        user_banned("b2", troll, duration_s=300),
        {"id": "broken", "snippet": {"type": "userBannedEvent", "userBannedDetails": {}}},
    ]
    comments, _ = parse_messages(items)
    assert [(c.id, c.member) for c in comments] == [("m1", True)]  # moderation items are not comments
    deleted, banned, timed = parse_moderation(items)  # the malformed ban is skipped
    assert (deleted.action, deleted.comment_id, deleted.id) == ("message_deleted", "m0", "d1")
    assert (banned.action, banned.author_id, banned.author, banned.ban_type) == (
        "user_banned",
        troll,
        "troll",
        "permanent",
    )
    assert (timed.ban_type, timed.ban_duration_s) == ("temporary", 300)


async def test_moderation_events_reach_the_bus_naming_the_viewer_as_their_comments_do(
    nats_url: str, settings: Settings
) -> None:
    troll = "UC" + "t" * 22
    chat_pages = [
        {
            "items": [text_message("m1", "保育料っていくら？", channel=troll, name="荒らし")],
            "pollingIntervalMillis": 1000,
        },
        {"items": [message_deleted("d1", "m1"), user_banned("b1", troll)], "pollingIntervalMillis": 1000},
        {"items": [event("end", "chatEndedEvent")], "offlineAt": "2026-11-30T12:00:00Z"},
    ]
    with FakeYouTubeServer(chat_pages) as server:
        _, lines = await run_once(yt_settings(settings, server), nats_url, server, FakeTime())
    assert [line["status"] for line in lines] == ["admitted", "moderation", "moderation"]
    assert [line["reason"] for line in lines[1:]] == ["message_deleted", "user_banned"]
    (comment,), _ = await stored(nats_url)
    assert comment.author_name == "荒らし" and comment.author.startswith("ch_")
    events = [ModerationV1.model_validate(m["data"]) for m in await read_all(nats_url, subjects.MODERATION_ALL)]
    deleted, banned = events
    assert (deleted.action, deleted.comment_id, deleted.source) == ("message_deleted", "m1", "youtube")
    assert banned.action == "user_banned" and banned.author == comment.author  # the same salted hash
    assert troll not in banned.model_dump_json()
