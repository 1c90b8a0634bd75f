"""kotae.services.ingest.onecomme: OneComme's WebSocket feed, against a local server in its message shape."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kotae.contracts import ModerationV1, SuperChat, subjects
from kotae.services.ingest.live import run_live
from kotae.services.ingest.onecomme import (
    OneCommeError,
    OneCommeFeed,
    comment_text,
    currency_of,
    parse_deletions,
    parse_frame,
)
from kotae.settings import Settings
from tests.factories import read_all, stored
from tests.fakes.onecomme_server import FakeOneComme, comments_frame, deleted_frame, onecomme_comment


def test_a_comments_frame_becomes_raw_comments() -> None:
    frame = comments_frame(
        onecomme_comment(
            "a1",
            "保育料っていくら？&lt;3",
            user="UCdddddddddddddddddddddd",
            name="しおみ",
            timestamp_ms=1_796_036_400_000,
        ),
        onecomme_comment("a2", "港の再開発は？", hasGift=True, price=500, unit="¥", paidText="¥500", isMember=True),
        onecomme_comment("a3", "みなさんこんばんは", isOwner=True),  # the streamer: not a viewer's question
        onecomme_comment("a4", '<img src="x.png" alt=":clap:" class="emoji">', service="twitch", user="tw42"),
        onecomme_comment("a5", "", hasGift=True, price=300, service="twitch", bits="cheer300"),
    )
    first, paid, emoji, cheer = parse_frame(frame)
    assert first.id == "a1" and first.text == "保育料っていくら？<3" and first.author == "しおみ"
    assert first.author_id == "UCdddddddddddddddddddddd"
    assert first.published_at == datetime.fromtimestamp(1_796_036_400, UTC)
    assert paid.superchat == SuperChat(amount=500, currency="JPY")
    assert paid.member and not first.member  # OneComme passes YouTube's membership on as isMember
    assert emoji.text == ":clap:" and emoji.author_id == "twitch:tw42"
    assert cheer.superchat == SuperChat(amount=300, currency="XXX") and cheer.text  # points have no currency


@pytest.mark.parametrize(
    "frame",
    [
        '{"type": "deleted", "data": ["a1"]}',
        "not json",
        '{"type": "comments", "data": {"comments": [{"data": {}}]}}',
        "[]",
    ],
)
def test_other_and_bad_frames_yield_nothing(frame: str) -> None:
    assert parse_frame(frame) == []


@pytest.mark.parametrize(
    ("unit", "paid", "code"),
    [("¥", None, "JPY"), ("$", None, "USD"), (None, "CA$5.00", "CAD"), ("EUR", None, "EUR"), (None, None, "XXX")],
)
def test_currencies(unit: str | None, paid: str | None, code: str) -> None:
    assert currency_of(unit, paid) == code


def test_comment_html_is_plain_text() -> None:
    assert comment_text('a &amp; b <img alt=":smile:" src="s.png"> <b>c</b>') == "a & b :smile: c"


def test_a_url_that_is_not_a_websocket_names_the_setting() -> None:
    with pytest.raises(OneCommeError, match="KOTAE_ONECOMME_URL"):
        OneCommeFeed("http://127.0.0.1:11180/sub")


async def test_the_feed_yields_the_backlog_then_each_frame() -> None:
    backlog = [onecomme_comment("b1", "期日前投票はいつから？")]
    frames = [
        comments_frame(onecomme_comment("c1", "草")),
        '{"type": "config", "data": {}}',
        comments_frame(onecomme_comment("c2", "バス代いくら？")),
    ]
    async with FakeOneComme(frames, backlog=backlog) as server:
        batches = [b async for b in OneCommeFeed(server.url, reconnect=False).batches()]
    assert [[c.id for c in b] for b in batches] == [["b1"], ["c1"], ["c2"]]


async def test_the_feed_reconnects_when_onecomme_restarts() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    async with FakeOneComme(
        [comments_frame(onecomme_comment("c1", "保育料は？"))], backlog=[onecomme_comment("c0", "こんばんは")]
    ) as server:
        feed = OneCommeFeed(server.url, reconnect=True, pause_s=0.5, sleep=sleep)
        seen: list[str] = []
        async for batch in feed.batches():
            seen += [c.id for c in batch]
            if len(seen) >= 4:
                break
    assert seen == ["c0", "c1", "c0", "c1"]  # the backlog comes again; triage drops the repeats by id
    assert feed.connections == 2 and pauses == [0.5]


async def test_comments_are_published_once_through_a_real_bus(nats_url: str, settings: Settings) -> None:
    backlog = [onecomme_comment("b1", "期日前投票はいつから？", user="UCeeeeeeeeeeeeeeeeeeeeee")]
    frames = [
        comments_frame(
            onecomme_comment("c1", "草"),
            onecomme_comment("c2", "港の再開発はいくら？", hasGift=True, price=1000, unit="¥"),
        ),
        comments_frame(onecomme_comment("b1", "期日前投票はいつから？", user="UCeeeeeeeeeeeeeeeeeeeeee")),  # a resend
    ]
    out = io.StringIO()
    async with FakeOneComme(frames, backlog=backlog) as server:
        feed = OneCommeFeed(server.url, reconnect=False)

        def source(js: Any) -> Any:
            return feed.batches()

        await run_live(settings, nats_url, source, source_name="onecomme", out=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["comment_id"], line["status"]) for line in lines] == [
        ("b1", "admitted"),
        ("c1", "dropped"),
        ("c2", "admitted"),
        ("b1", "resend"),
    ]
    comments, answers = await stored(nats_url)
    assert sorted(c.comment_id for c in comments) == ["b1", "c2"] and [a.comment_id for a in answers] == ["c1"]
    by_id = {c.comment_id: c for c in comments}
    assert by_id["c2"].superchat == SuperChat(amount=1000, currency="JPY") and by_id["c2"].priority == 2
    assert by_id["b1"].source == "onecomme" and by_id["b1"].author.startswith("ch_")


# --- deletions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        deleted_frame("a1", "a2"),
        deleted_frame(onecomme_comment("a1", "x"), onecomme_comment("a2", "y")),
        json.dumps({"type": "deleted", "data": {"comments": [onecomme_comment("a1", "x"), {"id": "a2"}]}}),
    ],
)
def test_a_deleted_frame_withdraws_each_comment_it_names(frame: str) -> None:
    events = parse_deletions(frame)
    assert [(e.action, e.comment_id) for e in events] == [("message_deleted", "a1"), ("message_deleted", "a2")]
    assert parse_frame(frame) == []  # and it is no comment
    assert parse_deletions(comments_frame(onecomme_comment("c1", "保育料は？"))) == []


async def test_deletions_reach_the_bus_as_moderation_events(nats_url: str, settings: Settings) -> None:
    frames = [comments_frame(onecomme_comment("c1", "保育料っていくら？")), deleted_frame("c1")]
    async with FakeOneComme(frames) as server:
        out = io.StringIO()
        feed = OneCommeFeed(server.url, reconnect=False)
        await run_live(settings, nats_url, lambda js: feed.batches(), source_name="onecomme", out=out)
    assert [json.loads(line)["status"] for line in out.getvalue().splitlines()] == ["admitted", "moderation"]
    (event,) = [ModerationV1.model_validate(m["data"]) for m in await read_all(nats_url, subjects.MODERATION_ALL)]
    assert (event.action, event.comment_id, event.source) == ("message_deleted", "c1", "onecomme")
