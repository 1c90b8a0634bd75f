"""Every subject and stream name kotae uses, defined once.

Subjects read general to specific and name intent, not technology:
``kotae.<what>.v<version>[.<kind>]``.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "kotae"

COMMENT: Final = f"{PREFIX}.comment.v1"
RETRIEVAL: Final = f"{PREFIX}.retrieval.v1"
RERANK: Final = f"{PREFIX}.rerank.v1"
DRAFT: Final = f"{PREFIX}.draft.v1"
ANSWER_PREFIX: Final = f"{PREFIX}.answer.v1"
ANSWER_ALL: Final = f"{ANSWER_PREFIX}.>"
EVALUATION: Final = f"{PREFIX}.evaluation.v1"
DEADLETTER_PREFIX: Final = f"{PREFIX}.deadletter.v1"
DEADLETTER_ALL: Final = f"{DEADLETTER_PREFIX}.>"

#: Terminal outcomes published on the answers stream, one subject each.
ANSWER_OUTCOMES: Final = ("verified", "rejected", "clarify", "unanswered", "dropped", "failed")


def answer(outcome: str) -> str:
    """Subject of a terminal answer outcome, e.g. ``kotae.answer.v1.verified``."""
    if outcome not in ANSWER_OUTCOMES:
        raise ValueError(f"unknown answer outcome {outcome!r}; expected one of {ANSWER_OUTCOMES}")
    return f"{ANSWER_PREFIX}.{outcome}"


def deadletter(stage: str) -> str:
    """Dead-letter subject of one stage, e.g. ``kotae.deadletter.v1.retriever``."""
    return f"{DEADLETTER_PREFIX}.{stage}"


# JetStream streams. Work hops live in one stream per hop so each can be sized
# and retained on its own; answers live in a stream that many consumers read.
STREAM_COMMENTS: Final = "KOTAE_COMMENTS"
STREAM_PIPELINE: Final = "KOTAE_PIPELINE"
STREAM_ANSWERS: Final = "KOTAE_ANSWERS"
STREAM_EVALUATIONS: Final = "KOTAE_EVALUATIONS"
STREAM_DEADLETTER: Final = "KOTAE_DEADLETTER"

STREAM_SUBJECTS: Final[dict[str, list[str]]] = {
    STREAM_COMMENTS: [COMMENT],
    STREAM_PIPELINE: [RETRIEVAL, RERANK, DRAFT],
    STREAM_ANSWERS: [ANSWER_ALL],
    STREAM_EVALUATIONS: [EVALUATION],
    STREAM_DEADLETTER: [DEADLETTER_ALL],
}


def stream_of(subject: str) -> str:
    """Name of the stream that stores ``subject``."""
    for stream, patterns in STREAM_SUBJECTS.items():
        for pattern in patterns:
            if pattern == subject or (
                pattern.endswith(".>") and subject.startswith(pattern[:-1])
            ):
                return stream
    raise ValueError(f"no stream stores subject {subject!r}")
