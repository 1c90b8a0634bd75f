"""Ingest: comments from YouTube live chat, OneComme, a replay file or stdin, triaged onto the bus.

Not a consumer: ``kotae ingest …``, ``kotae replay`` and ``kotae demo`` drive it.
"""

from kotae.clarify import BUCKET as CLARIFY_BUCKET
from kotae.contracts import AnswerV1, CommentV1, ModerationV1, subjects
from kotae.stage import Output, Stage

STAGE = Stage(
    name="ingest",
    description="Normalises, dedupes and triages comments; admits questions, drops the rest with a reason.",
    outputs=(
        Output(subjects.COMMENT, CommentV1, "A viewer's comment admitted as a question."),
        Output(subjects.answer("dropped"), AnswerV1, "A comment triage let go, with the reason."),
        Output(subjects.moderation("message_deleted"), ModerationV1, "A moderator deleted a comment."),
        Output(subjects.moderation("user_banned"), ModerationV1, "A moderator banned a viewer."),
    ),
    kv_buckets=lambda settings: (CLARIFY_BUCKET, settings.ingest_kv_bucket),
)
