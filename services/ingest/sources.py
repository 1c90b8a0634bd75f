"""Comment sources: a JSONL replay file and standard input, paced or not.

A line is ``{"id", "author", "text"[, "author_id", "published_at", "superchat", "member", "membership"]}``
(``membership``: ``{"kind": "new_member"|"milestone"|"gift"|"gift_received"[, "with_message"]}``), or a
moderation event: ``{"id", "moderation": "message_deleted", "comment_id"[, "published_at"]}`` (a
moderator deleted that comment) or ``{"id", "moderation": "user_banned", "author"[, "author_id",
"ban_type", "ban_duration_s", "published_at"]}`` (a moderator banned that viewer). A file is read
and checked whole before anything is published, so a bad line stops the command with file, line
and field and nothing half-sent. A live feed (``kotae ingest stdin --follow``) skips a bad line,
saying so on stderr with its line number, and goes on.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kotae.contracts import SuperChat
from kotae.contracts.v1 import Membership


class CommentInputError(ValueError):
    """A comment line is malformed; the message names file, line and field."""


class RawComment(BaseModel):
    """A comment as a platform or a replay file gives it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    author: str = Field(default="", max_length=200)
    author_id: str | None = Field(
        default=None, max_length=200, description="The platform's user id; hashed (salted) before it enters the bus."
    )
    text: str = Field(min_length=1, max_length=5000)
    published_at: datetime | None = None
    superchat: SuperChat | None = None
    member: bool = Field(default=False, description="The platform says the author is a member of the channel.")
    membership: Membership | None = Field(
        default=None, description="A membership event (joined, milestone, gift): thanked on air."
    )

    @field_validator("published_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class RawModeration(BaseModel):
    """What a platform's moderators did, as the platform (or a replay file) says it.

    ``message_deleted`` names the comment; ``user_banned`` the viewer, by the same
    ``author``/``author_id`` their comments carry (ingest hashes the id the same way).
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    id: str = Field(min_length=1, max_length=200, description="The platform's id of the moderation event.")
    action: Literal["message_deleted", "user_banned"] = Field(alias="moderation")
    comment_id: str | None = Field(default=None, max_length=200)
    author: str = Field(default="", max_length=200)
    author_id: str | None = Field(default=None, max_length=200)
    ban_type: Literal["permanent", "temporary"] | None = None
    ban_duration_s: int | None = Field(default=None, ge=0)
    published_at: datetime | None = None

    @field_validator("published_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _names_its_target(self) -> RawModeration:
        if self.action == "message_deleted" and not self.comment_id:
            raise ValueError("a message_deleted line names the comment: comment_id")
        if self.action == "user_banned" and not (self.author or self.author_id):
            raise ValueError("a user_banned line names the viewer: author or author_id")
        return self


#: What a replay file or a live source yields: a comment, or a moderation event.
ChatItem = RawComment | RawModeration


def parse_line(line: str, where: str) -> ChatItem:
    """One JSONL line: a comment, or (with a ``moderation`` field) a moderation event."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CommentInputError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if isinstance(data, dict) and "moderation" in data:
        try:
            return RawModeration.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "moderation"
            raise CommentInputError(f"{where}: field '{field}': {err['msg']}") from None
    return parse_comment(line, where)


def parse_comment(line: str, where: str) -> RawComment:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CommentInputError(f"{where}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise CommentInputError(f"{where}: expected a JSON object, got {type(data).__name__}")
    try:
        return RawComment.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "comment"
        raise CommentInputError(f"{where}: field '{field}': {err['msg']}") from None


def read_replay_file(path: Path) -> list[ChatItem]:
    """Every line of a JSONL file, comments and moderation events in file order, checked before any is used."""
    path = Path(path)
    if not path.is_file():
        raise CommentInputError(f"{path}: no such file")
    items: list[ChatItem] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                items.append(parse_line(line, f"{path}:{lineno}"))
    return items


def read_comment_file(path: Path) -> list[RawComment]:
    """Every comment of a JSONL file (its moderation lines checked, then left out)."""
    return [item for item in read_replay_file(path) if isinstance(item, RawComment)]


def read_stream(stream: IO[str], name: str = "<stdin>") -> Iterator[ChatItem]:
    """Comments (and moderation events) from a stream, one JSON object per line, as they arrive."""
    for lineno, line in enumerate(stream, 1):
        if line.strip():
            yield parse_line(line, f"{name}:{lineno}")


Timing = Literal["original", "fast"]


async def paced(
    comments: Iterable[ChatItem],
    timing: Timing = "fast",
    *,
    speed: float = 1.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[ChatItem]:
    """Comments in file order; with ``timing="original"`` each one waits for the gap
    between its ``published_at`` and the previous one's (divided by ``speed``), so a
    recorded chat replays at the pace it was written. Lines without a timestamp,
    or earlier than the previous one, follow at once.
    """
    if timing not in ("original", "fast"):
        raise ValueError(f"timing must be 'original' or 'fast', not {timing!r}")
    previous: datetime | None = None
    for comment in comments:
        at = comment.published_at
        if timing == "original" and at is not None and previous is not None:
            gap = (at - previous).total_seconds() / speed
            if gap > 0:
                await sleep(gap)
        if at is not None and (previous is None or at > previous):
            previous = at
        yield comment


def report_bad_line(error: CommentInputError) -> None:
    """What a live feed does with a bad line by default: say so on stderr, with its line number and field."""
    sys.stderr.write(f"kotae: skipped {error}\n")
    sys.stderr.flush()


async def follow_stream(
    stream: IO[str], name: str = "<stdin>", *, on_bad_line: Callable[[CommentInputError], None] = report_bad_line
) -> AsyncIterator[list[ChatItem]]:
    """Comments from a stream as each line arrives (one-comment batches), for a pipe that stays open.

    Lines are read in a worker thread so the event loop keeps publishing. A live feed
    goes on past a bad line: it is skipped and handed to ``on_bad_line`` (by default a
    line on stderr naming it), unlike a replay file, which is checked whole before
    anything is published.
    """
    lineno = 0
    while True:
        line = await asyncio.to_thread(stream.readline)
        if not line:
            return
        lineno += 1
        if not line.strip():
            continue
        try:
            item = parse_line(line, f"{name}:{lineno}")
        except CommentInputError as exc:
            on_bad_line(exc)
            continue
        yield [item]
