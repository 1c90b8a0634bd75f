"""Comment sources: a JSONL replay file and standard input.

A line is ``{"id", "author", "text"[, "published_at", "superchat"]}``. A file is
read and checked whole before anything is published, so a bad line stops the
command with file, line and field and nothing half-sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kotae.contracts import SuperChat


class CommentInputError(ValueError):
    """A comment line is malformed; the message names file, line and field."""


class RawComment(BaseModel):
    """A comment as a platform or a replay file gives it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    author: str = Field(default="", max_length=200)
    text: str = Field(min_length=1, max_length=5000)
    published_at: datetime | None = None
    superchat: SuperChat | None = None

    @field_validator("published_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value


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


def read_comment_file(path: Path) -> list[RawComment]:
    """Every comment of a JSONL file, checked before any is used."""
    path = Path(path)
    if not path.is_file():
        raise CommentInputError(f"{path}: no such file")
    comments = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                comments.append(parse_comment(line, f"{path}:{lineno}"))
    return comments


def read_stream(stream: IO[str], name: str = "<stdin>") -> Iterator[RawComment]:
    """Comments from a stream, one JSON object per line, as they arrive."""
    for lineno, line in enumerate(stream, 1):
        if line.strip():
            yield parse_comment(line, f"{name}:{lineno}")
