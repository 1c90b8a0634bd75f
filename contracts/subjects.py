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
MODERATION_PREFIX: Final = f"{PREFIX}.moderation.v1"
MODERATION_ALL: Final = f"{MODERATION_PREFIX}.>"
CONTROL_PREFIX: Final = f"{PREFIX}.control.v1"
CONTROL_ALL: Final = f"{CONTROL_PREFIX}.>"
ONAIR_PREFIX: Final = f"{PREFIX}.onair.v1"
ONAIR_ALL: Final = f"{ONAIR_PREFIX}.>"

#: Terminal outcomes published on the answers stream, one subject each.
ANSWER_OUTCOMES: Final = ("verified", "rejected", "clarify", "unanswered", "dropped", "failed")


def answer(outcome: str) -> str:
    """Subject of a terminal answer outcome, e.g. ``kotae.answer.v1.verified``."""
    if outcome not in ANSWER_OUTCOMES:
        raise ValueError(f"unknown answer outcome {outcome!r}; expected one of {ANSWER_OUTCOMES}")
    return f"{ANSWER_PREFIX}.{outcome}"


#: What a platform's moderators (or the stream's operator) did to a comment or a viewer.
MODERATION_ACTIONS: Final = ("message_deleted", "user_banned")

#: Operator commands to the on-air stage; ``status`` is read from its key-value bucket, not sent.
CONTROL_COMMANDS: Final = ("skip", "next", "pause", "resume", "hold", "approve", "reject", "block", "end")

#: What the on-air stage says about each answer: three steps (``sentence``: the next sentence's clip, ready) and
#: six final outcomes.
ONAIR_EVENTS: Final = (
    "queued",
    "started",
    "sentence",
    "finished",
    "expired",
    "withdrawn",
    "skipped",
    "shed",
    "already_aired",
)
#: Every verified answer ends in exactly one of these.
AIR_OUTCOMES: Final = ("finished", "expired", "withdrawn", "skipped", "shed", "already_aired")


def moderation(action: str) -> str:
    """Subject of a moderation event, e.g. ``kotae.moderation.v1.message_deleted``."""
    if action not in MODERATION_ACTIONS:
        raise ValueError(f"unknown moderation action {action!r}; expected one of {MODERATION_ACTIONS}")
    return f"{MODERATION_PREFIX}.{action}"


def control(command: str, user: str) -> str:
    """Subject of an operator command sent by NATS user ``user``, e.g. ``kotae.control.v1.skip.operator``.

    The sender's user is the last token, and a user may publish only its own
    (``control_from``), so whoever reads a command knows who sent it.
    """
    if command not in CONTROL_COMMANDS:
        raise ValueError(f"unknown control command {command!r}; expected one of {CONTROL_COMMANDS}")
    if not user or not all(ch.isalnum() or ch in "-_" for ch in user):
        raise ValueError(f"a NATS user in a subject is letters, digits, '-' and '_', not {user!r}")
    return f"{CONTROL_PREFIX}.{command}.{user}"


def control_from(user: str) -> str:
    """Every command subject ``user`` may publish: ``kotae.control.v1.*.<user>``."""
    return f"{CONTROL_PREFIX}.*.{user}"


def sender_of(control_subject: str) -> tuple[str, str]:
    """(command, NATS user) of a command subject."""
    rest = control_subject.removeprefix(CONTROL_PREFIX + ".")
    command, _, user = rest.partition(".")
    return command, user


def onair(event: str) -> str:
    """Subject of an on-air event, e.g. ``kotae.onair.v1.started``."""
    if event not in ONAIR_EVENTS:
        raise ValueError(f"unknown on-air event {event!r}; expected one of {ONAIR_EVENTS}")
    return f"{ONAIR_PREFIX}.{event}"


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
STREAM_MODERATION: Final = "KOTAE_MODERATION"
STREAM_CONTROL: Final = "KOTAE_CONTROL"
STREAM_ONAIR: Final = "KOTAE_ONAIR"

STREAM_SUBJECTS: Final[dict[str, list[str]]] = {
    STREAM_COMMENTS: [COMMENT],
    STREAM_PIPELINE: [RETRIEVAL, RERANK, DRAFT],
    STREAM_ANSWERS: [ANSWER_ALL],
    STREAM_EVALUATIONS: [EVALUATION],
    STREAM_DEADLETTER: [DEADLETTER_ALL],
    STREAM_MODERATION: [MODERATION_ALL],
    STREAM_CONTROL: [CONTROL_ALL],
    STREAM_ONAIR: [ONAIR_ALL],
}


def stream_of(subject: str) -> str:
    """Name of the stream that stores ``subject``."""
    for stream, patterns in STREAM_SUBJECTS.items():
        for pattern in patterns:
            if pattern == subject or (pattern.endswith(".>") and subject.startswith(pattern[:-1])):
                return stream
    raise ValueError(f"no stream stores subject {subject!r}")
