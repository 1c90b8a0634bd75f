"""kotae.services.ingest.sources: reading comment files and streams."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

import kotae.samples
from kotae.services.ingest.sources import (
    CommentInputError,
    RawComment,
    RawModeration,
    read_comment_file,
    read_replay_file,
    read_stream,
)


def write(path: Path, *rows: object) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_reads_every_comment_with_its_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.jsonl",
        {
            "id": "c1",
            "author": "しおみママ",
            "text": "保育料っていくらになるの",
            "published_at": "2026-11-30T20:00:21+09:00",
        },
        "",
        {
            "id": "c2",
            "text": "港の再開発っていくらかかるの",
            "superchat": {"amount": 500, "currency": "JPY"},
            "extra": "ignored",
        },
    )
    first, second = read_comment_file(path)
    assert first.id == "c1" and first.author == "しおみママ" and first.text == "保育料っていくらになるの"
    assert first.published_at == datetime(2026, 11, 30, 20, 0, 21, tzinfo=timezone(timedelta(hours=9)))
    assert second.superchat is not None and second.superchat.amount == 500 and second.superchat.currency == "JPY"
    assert second.published_at is None and second.author == ""


def test_naive_timestamps_are_taken_as_utc(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": "hi?", "published_at": "2026-11-30T11:00:00"})
    (comment,) = read_comment_file(path)
    assert comment.published_at == datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


def test_the_bundled_sample_reads_whole() -> None:
    path = Path(kotae.samples.__file__).parent / "comments.jsonl"
    comments = read_comment_file(path)
    assert len(comments) == 34
    assert [c.id for c in comments].count("c003") == 2  # the resent line is kept for triage to drop
    moderation = [item for item in read_replay_file(path) if isinstance(item, RawModeration)]
    assert [(m.action, m.comment_id or m.author) for m in moderation] == [
        ("message_deleted", "c033"),
        ("user_banned", "通りすがり"),
    ]


def test_moderation_lines_are_read_in_their_place_among_the_comments(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.jsonl",
        {"id": "c1", "text": "保育料は？"},
        {"id": "m1", "moderation": "message_deleted", "comment_id": "c1", "published_at": "2026-11-30T11:00:00"},
        {"id": "m2", "moderation": "user_banned", "author_id": "UCx", "ban_type": "temporary", "ban_duration_s": 60},
    )
    comment, deleted, banned = read_replay_file(path)
    assert isinstance(comment, RawComment) and comment.id == "c1"
    assert isinstance(deleted, RawModeration) and deleted.comment_id == "c1"
    assert deleted.published_at == datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    assert isinstance(banned, RawModeration) and (banned.author_id, banned.ban_duration_s) == ("UCx", 60)
    assert [c.id for c in read_comment_file(path)] == ["c1"]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"id": "m1", "moderation": "message_deleted"}, "moderation"),  # names no comment
        ({"id": "m1", "moderation": "user_banned"}, "moderation"),  # names no viewer
        ({"id": "m1", "moderation": "timed_out", "author": "x"}, "moderation"),
        ({"id": "m1", "moderation": "user_banned", "author": "x", "ban_duration_s": -1}, "ban_duration_s"),
    ],
)
def test_a_bad_moderation_line_names_file_line_and_field(tmp_path: Path, line: dict, field: str) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": "ok?"}, line)
    with pytest.raises(CommentInputError) as err:
        read_replay_file(path)
    assert f"{path}:2: field '{field}'" in str(err.value)


def test_missing_text_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": "ok?"}, {"id": "c2", "author": "x"})
    with pytest.raises(CommentInputError) as err:
        read_comment_file(path)
    assert f"{path}:2:" in str(err.value)
    assert "field 'text'" in str(err.value)


def test_empty_text_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": ""})
    with pytest.raises(CommentInputError, match=r"c\.jsonl:1: field 'text'"):
        read_comment_file(path)


def test_bad_published_at_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.jsonl", {"id": "c1", "text": "ok?"}, "", {"id": "c3", "text": "ok?", "published_at": "yesterday"}
    )
    with pytest.raises(CommentInputError) as err:
        read_comment_file(path)
    assert f"{path}:3:" in str(err.value)
    assert "field 'published_at'" in str(err.value)


def test_non_object_line_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": "ok?"}, '"just a string"')
    with pytest.raises(CommentInputError) as err:
        read_comment_file(path)
    assert f"{path}:2:" in str(err.value)
    assert "expected a JSON object, got str" in str(err.value)


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", "{oops")
    with pytest.raises(CommentInputError, match=r"c\.jsonl:1: invalid JSON"):
        read_comment_file(path)


def test_bad_superchat_names_the_nested_field(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", {"id": "c1", "text": "ok?", "superchat": {"amount": -1, "currency": "JPY"}})
    with pytest.raises(CommentInputError, match=r"field 'superchat\.amount'"):
        read_comment_file(path)


def test_a_replay_line_may_carry_a_membership_event_and_a_bad_kind_names_the_field(tmp_path: Path) -> None:
    joined = {"id": "j1", "author": "アリス", "text": "Welcome!", "membership": {"kind": "new_member"}}
    milestone = {
        "id": "k1",
        "text": "保育料は？",
        "membership": {"kind": "milestone", "months": 6, "with_message": True},
    }
    (first, second) = read_comment_file(write(tmp_path / "m.jsonl", joined, milestone))
    assert first.membership is not None and first.membership.kind == "new_member" and not first.membership.with_message
    assert second.membership is not None and second.membership.months == 6 and second.membership.with_message
    path = write(tmp_path / "bad.jsonl", {"id": "x", "text": "hi", "membership": {"kind": "fan"}})
    with pytest.raises(CommentInputError, match=r"bad\.jsonl:1: field 'membership\.kind'"):
        read_comment_file(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommentInputError, match="no such file"):
        read_comment_file(tmp_path / "nope.jsonl")


def test_read_stream_yields_as_it_goes_and_names_the_line() -> None:
    stream = io.StringIO('{"id": "a", "text": "one?"}\n\n{"id": "b"}\n')
    comments = read_stream(stream, name="<stdin>")
    assert next(comments).id == "a"  # the first comment arrives before the bad line is read
    with pytest.raises(CommentInputError, match=r"<stdin>:3: field 'text'"):
        next(comments)


async def test_original_timing_keeps_the_gaps_between_comments() -> None:
    from kotae.services.ingest.sources import RawComment, paced

    t0 = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    comments = [
        RawComment(id="a", text="q?", published_at=t0),
        RawComment(id="b", text="q?", published_at=t0 + timedelta(seconds=4)),
        RawComment(id="c", text="q?"),  # no timestamp: follows at once
        RawComment(id="d", text="q?", published_at=t0 + timedelta(seconds=3)),  # out of order: at once
        RawComment(id="e", text="q?", published_at=t0 + timedelta(seconds=10)),
    ]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    assert [c.id async for c in paced(comments, "original", sleep=sleep)] == ["a", "b", "c", "d", "e"]
    assert slept == [4.0, 6.0]
    slept.clear()
    assert [c.id async for c in paced(comments, "original", speed=2.0, sleep=sleep)] == ["a", "b", "c", "d", "e"]
    assert slept == [2.0, 3.0]
    slept.clear()
    assert len([c async for c in paced(comments, "fast", sleep=sleep)]) == 5 and slept == []
