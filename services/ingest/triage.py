"""Triage: which comments are worth the expensive stages.

Every comment is normalised (NFKC, widths, chat noise), deduplicated by its
platform id, and checked by the offline question detector (``question_rules``):
questions and requests are admitted; greetings, applause and laughter end as a
``dropped`` outcome with the reason. Super Chats are admitted first.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from kotae.contracts import CommentV1
from kotae.knowledge.records import detect_lang
from kotae.knowledge.text import normalize, search_tokens
from kotae.services.ingest.sources import RawComment

METHOD = "question_rules"

_JA_QUESTION = re.compile(
    r"(何|なに|なん|いつ|どこ|どれ|どの|どう|どんな|誰|だれ|なぜ|なんで|いくら|幾ら|いくつ|何人|何か所|"
    r"ですか|ますか|でしょうか|ません?か|んですか|のか|かな|っけ|教えて|知りたい|ください|下さい|てほしい|て欲しい|"
    r"ある\?|あるの|なるの|できる|出来る|本当|ほんと)"
)
_JA_FINAL = re.compile(r"(か|の|かな|っけ|て|って|てよ|てね)[\s!?。]*$")
_EN_QUESTION = re.compile(
    r"\b(what|when|where|who|whom|why|how|which|is there|are there|can|could|do|does|did|will|would|should|"
    r"is it|are you|tell|say|explain|please)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """True for questions and requests; False for chatter (greetings, 草, 8888, emoji)."""
    norm = normalize(text)
    if not search_tokens(norm):
        return False  # nothing to search for: laughter, applause, emoji, greetings
    if norm.endswith("?"):
        return True
    if detect_lang(norm) == "ja":
        return bool(_JA_QUESTION.search(norm) or _JA_FINAL.search(norm))
    return bool(_EN_QUESTION.search(norm))


@dataclass(frozen=True)
class Dropped:
    comment: CommentV1
    reason: str


def hash_author(author: str) -> str:
    """Authors enter the bus as display names; ids that look like channel ids are hashed."""
    if author.startswith("UC") and len(author) == 24:
        return "ch_" + hashlib.sha256(author.encode()).hexdigest()[:16]
    return author


class Triage:
    """Stateful triage for one stream: remembers the ids it has seen."""

    def __init__(self, *, stream_id: str, kb: str, source: str) -> None:
        self.stream_id = stream_id
        self.kb = kb
        self.source = source
        self.seen: set[str] = set()

    def to_comment(self, raw: RawComment) -> CommentV1:
        norm = normalize(raw.text) or raw.text
        return CommentV1(
            comment_id=raw.id,
            stream_id=self.stream_id,
            author=hash_author(raw.author),
            text=raw.text,
            normalized=norm,
            lang=detect_lang(norm),
            published_at=raw.published_at or datetime.now(timezone.utc),
            source=self.source,
            superchat=raw.superchat,
            priority=2 if raw.superchat else 1,
            kb=self.kb,
        )

    def admit(self, raw: RawComment, *, awaiting_reply: bool = False) -> CommentV1 | Dropped | None:
        """The comment to publish, a Dropped outcome, or None for a resend of a seen id.

        ``awaiting_reply``: the stream asked this viewer which topic they meant, so
        their next line is admitted even when it is not a question.
        """
        if raw.id in self.seen:
            return None
        self.seen.add(raw.id)
        comment = self.to_comment(raw)
        if awaiting_reply:
            return comment.model_copy(update={"priority": max(comment.priority, 2)})
        if comment.superchat is None and not is_question(comment.normalized):
            return Dropped(comment, "not_a_question: chatter (greeting, reaction or laughter)")
        return comment
