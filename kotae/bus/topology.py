"""JetStream streams and durable pull consumers, declared in code.

Every replica of a stage binds the same durable consumer, so scaling a stage is
starting another process. Streams are declared once, up front, by whoever
connects first (``ensure_streams``); subscribers never redeclare them.
"""

from __future__ import annotations

import asyncio

import nats
import structlog
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy as JsAckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError, ServiceUnavailableError

from kotae.bus.connection import connect_options
from kotae.contracts import subjects
from kotae.settings import Settings
from kotae.stage import Stage

log = structlog.get_logger("kotae.bus")

DAY = 24 * 3600.0

#: How long each stream keeps messages. Work hops are short-lived; answers,
#: evaluations and dead letters are the audit log and stay longer.
RETENTION_S: dict[str, float] = {
    subjects.STREAM_COMMENTS: 7 * DAY,
    subjects.STREAM_PIPELINE: 7 * DAY,
    subjects.STREAM_ANSWERS: 30 * DAY,
    subjects.STREAM_EVALUATIONS: 365 * DAY,
    subjects.STREAM_DEADLETTER: 30 * DAY,
    # What a moderator withdrew and what an operator ordered, and what aired: the stream's audit log.
    subjects.STREAM_MODERATION: 30 * DAY,
    subjects.STREAM_CONTROL: 30 * DAY,
    subjects.STREAM_ONAIR: 30 * DAY,
}

#: Window in which JetStream drops a publish whose Nats-Msg-Id it has seen.
DUPLICATE_WINDOW_S = 10 * 60.0


def stream_config(name: str, settings: Settings) -> StreamConfig:
    return StreamConfig(
        name=name,
        subjects=list(subjects.STREAM_SUBJECTS[name]),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        max_age=RETENTION_S[name],
        num_replicas=settings.stream_replicas,
        duplicate_window=DUPLICATE_WINDOW_S,
        max_msg_size=settings.max_payload_bytes * 4,
    )


#: How long declaring the streams keeps trying while a cluster elects a stream leader.
DECLARE_PATIENCE_S = 60.0


#: The settings kotae gives a stream, compared with what the server holds.
_DECLARED = (
    "subjects",
    "retention",
    "storage",
    "discard",
    "max_age",
    "num_replicas",
    "duplicate_window",
    "max_msg_size",
)


def differences(wanted: StreamConfig, held: StreamConfig) -> list[str]:
    """The settings in which the stream the server holds differs from the one kotae declares."""
    out = []
    for name in _DECLARED:
        a, b = getattr(wanted, name), getattr(held, name)
        if name == "subjects":
            a, b = sorted(a or []), sorted(b or [])
        elif isinstance(a, float) or isinstance(b, float):
            a, b = round(float(a or 0), 3), round(float(b or 0), 3)
        if a != b:
            out.append(f"{name} {b!r} -> {a!r}")
    return out


async def _declare(js: JetStreamContext, config: StreamConfig, *, update: bool) -> None:
    try:
        info = await js.stream_info(config.name)
    except NotFoundError:
        await js.add_stream(config)
        return
    changed = differences(config, info.config)
    if not changed:
        return
    if not update:
        # A stage's NATS user may create a missing stream but not change one (it could otherwise
        # drop subjects or shorten retention for every stage): an operator applies the change.
        log.warning(
            "stream.differs",
            stream=config.name,
            changes=changed,
            apply="kotae streams, as a user that may manage streams",
        )
        return
    try:
        await js.update_stream(config)
    except BadRequestError:
        # A setting that cannot change in place (e.g. storage) keeps the old stream.
        log.warning("stream.kept", stream=config.name, changes=changed)


async def ensure_streams(
    js: JetStreamContext, settings: Settings, *, update: bool = False, patience_s: float = DECLARE_PATIENCE_S
) -> None:
    """Create every kotae stream that is missing; with ``update``, also bring existing ones to the code's settings.

    Stages, ingest and replays create what is missing and leave existing streams
    alone (their NATS users may not change streams); ``kotae streams`` and the
    embedded stack, whose users may, update them.

    Right after a node of a cluster is lost, a stream answers nothing until a new
    leader is elected (seconds); declaring retries with a growing pause meanwhile,
    so a stage or a replay started then waits instead of failing.
    """
    loop = asyncio.get_running_loop()
    for name in subjects.STREAM_SUBJECTS:
        config = stream_config(name, settings)
        deadline = loop.time() + patience_s
        pause = 0.25
        while True:
            try:
                await _declare(js, config, update=update)
                break
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError):
                if loop.time() + pause > deadline:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 4.0)


async def ensure_streams_at(url: str, settings: Settings, *, update: bool = True) -> None:
    """Connect to ``url`` and declare the streams (creating and, with ``update``, updating them)."""
    nc = await nats.connect(**connect_options(settings, url))
    try:
        await ensure_streams(nc.jetstream(), settings, update=update)
    finally:
        await nc.drain()


#: Deliveries JetStream allows beyond KOTAE_MAX_DELIVER for the give-up path itself.
GIVE_UP_RETRIES = 10


def consumer_config(stage: Stage, settings: Settings) -> ConsumerConfig:
    """The durable pull consumer every replica of ``stage`` binds."""
    if stage.consumes is None:
        raise TypeError(f"stage {stage.name} consumes nothing")
    return ConsumerConfig(
        durable_name=stage.durable,
        filter_subject=stage.consumes.subject,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=JsAckPolicy.EXPLICIT,
        ack_wait=settings.ack_wait_s,
        # The edge gives up after KOTAE_MAX_DELIVER deliveries on its own (terminal
        # outcome + dead letter). JetStream allows a few more, so a give-up whose own
        # publish fails (e.g. during a leader election) is redelivered, not lost.
        max_deliver=settings.max_deliver + GIVE_UP_RETRIES,
        max_ack_pending=max(1000, settings.inflight * 8),
    )
