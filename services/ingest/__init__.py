"""Ingest: comments from YouTube live chat, OneComme, a replay file or stdin, triaged onto the bus.

Not a consumer: ``kotae ingest …``, ``kotae replay`` and ``kotae demo`` drive it.
"""

from kotae.clarify import BUCKET as CLARIFY_BUCKET
from kotae.contracts import AnswerV1, CommentV1, ModerationV1, subjects
from kotae.stage import Input, Output, Stage

#: The JetStream key-value bucket of the answer cache (``answer_cache.py``).
ANSWER_CACHE_BUCKET = "kotae_answer_cache"

STAGE = Stage(
    name="ingest",
    description="Normalises, dedupes and triages comments; admits questions, drops the rest with a reason.",
    outputs=(
        Output(subjects.COMMENT, CommentV1, "A viewer's comment admitted as a question."),
        Output(subjects.answer("dropped"), AnswerV1, "A comment triage let go, with the reason."),
        Output(
            subjects.answer("verified"),
            AnswerV1,
            "A question already verified in this show, answered from the answer cache (methods: cached).",
        ),
        Output(subjects.moderation("message_deleted"), ModerationV1, "A moderator deleted a comment."),
        Output(subjects.moderation("user_banned"), ModerationV1, "A moderator banned a viewer."),
    ),
    kv_buckets=lambda settings: (CLARIFY_BUCKET, settings.ingest_kv_bucket, ANSWER_CACHE_BUCKET),
    reads=(Input(subjects.answer("verified"), AnswerV1, "Verified answers, kept in the answer cache."),),
)
