"""A busy chat made from the bundled sample: hundreds of comments, with what a moderator and the voice must handle.

``busy_chat(n, rate_per_s=…)`` writes a replay file's lines (the format of
``kotae replay``): the sample's questions (``questions.jsonl`` and the answerable
comments) asked by many viewers, chatter between them, Super Chats of several
amounts, the same question asked again after ingest's merge window (a repeat the
voice must not air twice) and within it (merged, its askers credited), one
comment a moderator deletes, and one viewer who is banned after a few comments.
Gaps between comments are exponential around ``1 / rate_per_s``, seeded, so a run
is repeatable. ``python -m kotae.samples.busy_chat N RATE > chat.jsonl`` prints one.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta, timezone
from importlib import resources
from typing import Any

JST = timezone(timedelta(hours=9))
START = datetime(2026, 11, 30, 20, 0, tzinfo=JST)
CHATTER = (
    "こんばんは〜",
    "888888",
    "草",
    "わこつ",
    "初見です",
    "👏👏👏",
    "lol",
    "がんばれー！",
    "おつかれ",
    "なるほど",
)
#: Who is deleted and who is banned, so a test or a bench can find them.
DELETED_AUTHOR = "消される人"
BANNED_AUTHOR = "荒らし"


def sample_questions() -> list[str]:
    """Every answerable question text of the bundled sample, once each."""
    root = resources.files("kotae.samples")
    texts = []
    for line in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("kind") == "answerable":
            texts.append(row["text"])
    return list(dict.fromkeys(texts))


def busy_chat(
    n: int, *, rate_per_s: float = 2.0, seed: int = 20261130, start: datetime = START
) -> list[dict[str, Any]]:
    """``n`` comments at about ``rate_per_s`` a second of chat time (and the moderation lines among them)."""
    rng = random.Random(seed)
    questions = sample_questions()
    lines: list[dict[str, Any]] = []
    at = start
    repeat_text = questions[0]
    for i in range(n):
        at += timedelta(seconds=rng.expovariate(rate_per_s))
        cid = f"b{i:04d}"
        row: dict[str, Any] = {"id": cid, "author": f"viewer{rng.randrange(n // 2 + 1):03d}", "published_at": at}
        roll = rng.random()
        if i in (n // 10, n // 2, (9 * n) // 10):
            row["text"] = repeat_text  # the same question, minutes apart: air it once
        elif i == n // 3:
            row.update(author=DELETED_AUTHOR, text=rng.choice(questions))
            lines.append(row)
            at += timedelta(seconds=1.5)
            lines.append({"id": f"mod-{cid}", "moderation": "message_deleted", "comment_id": cid, "published_at": at})
            continue
        elif roll < 0.2:
            row["text"] = rng.choice(CHATTER)
        elif roll < 0.25:
            row["text"] = rng.choice(questions)
            row["superchat"] = {"amount": rng.choice((500, 1000, 2000, 5000, 10000)), "currency": "JPY"}
        elif roll < 0.29 and i < (2 * n) // 3:
            row.update(author=BANNED_AUTHOR, text=rng.choice(questions))
        else:
            row["text"] = rng.choice(questions)
        lines.append(row)
        if i == (2 * n) // 3:
            at += timedelta(seconds=0.5)
            lines.append(
                {"id": "mod-ban", "moderation": "user_banned", "author": BANNED_AUTHOR, "ban_type": "permanent",
                 "published_at": at}
            )  # fmt: skip
    return lines


def to_jsonl(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False, default=lambda d: d.isoformat()) + "\n" for line in lines)


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    sys.stdout.write(to_jsonl(busy_chat(count, rate_per_s=rate)))
