"""Who may do what on the bus: one NATS user per service, derived from the stage declarations.

A stage's user may publish exactly the subjects its declaration lists (its
outputs and its dead letters), pull from its own durable consumer, read what it
declares in ``reads`` through consumers of its own, use the key-value buckets it
declares, and receive replies only on its own inbox prefix
(``_INBOX_<user>``), so it can neither write another stage's subject nor read
what is delivered to another stage. ``deploy/k8s/build.py`` writes these users
into the production NATS configuration and :class:`kotae.stack.Stack` runs the
embedded server with the same ones, so the two cannot drift apart.

Example::

    users = service_users(STAGES, settings)      # {"retriever": Permissions(...), ...}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kotae.bus.connection import inbox_of
from kotae.contracts import subjects
from kotae.endpoint_slots import BUCKET as MODEL_SLOTS_BUCKET
from kotae.settings import Settings
from kotae.stage import Stage

#: The login of ``kotae streams`` on a deployed server: creates and updates kotae's streams, nothing else.
STREAMS = "streams"
#: Users of the processes that drive the embedded stack rather than serve in it.
STACK = "stack"  # declares the streams, watches the stages' consumers come up
REPLAY = "replay"  # `kotae demo`/`replay`/`eval`: ingests comments and reads their outcomes
REPORT = "report"  # `kotae report`: reads the evaluations
#: Readers of the answers (an overlay, a TTS, a moderation tool): consumers of their own, nothing else.
READER = "reader"
#: Unrestricted; the embedded server has it only when the process that starts it asks
#: (tests and benchmarks that publish anywhere). That process holds every password anyway.
ADMIN = "admin"
#: The service whose user publishes comments (the stage that consumes nothing).
INGEST = "ingest"
#: The operator at the desk (`kotae onair …`): sends commands as itself, reads the status the stages keep.
OPERATOR = "operator"

#: Every process creates the streams it uses when they are missing (idempotent) and reads stream
#: info. Changing an existing stream is not among them: a stage could otherwise drop subjects or
#: shorten retention for every stage (see kotae.bus.topology.ensure_streams).
STREAM_DECLARE = ("$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.STREAM.CREATE.>", "$JS.API.STREAM.NAMES")
#: Creating and updating: the embedded stack's own login, which brings streams to the code's settings.
STREAM_ADMIN = (*STREAM_DECLARE, "$JS.API.STREAM.UPDATE.>")

#: Streams whose messages are outcomes that others may read (never the work in flight).
OUTCOME_STREAMS = (
    subjects.STREAM_ANSWERS,
    subjects.STREAM_DEADLETTER,
    subjects.STREAM_EVALUATIONS,
    subjects.STREAM_ONAIR,
)


@dataclass(frozen=True)
class Permissions:
    """A NATS user's publish allow (and deny) list and subscribe allow list."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    publish_deny: tuple[str, ...] = ()

    def config(self) -> dict[str, Any]:
        publish: dict[str, list[str]] = {"allow": list(self.publish)}
        if self.publish_deny:
            publish["deny"] = list(self.publish_deny)
        return {"publish": publish, "subscribe": {"allow": list(self.subscribe)}}


def _durable(stream: str, durable: str) -> list[str]:
    """What a process needs to bind and pull from its durable consumer, and to ack."""
    return [
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _kv(bucket: str) -> list[str]:
    return [
        f"$KV.{bucket}.>",
        f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
        f"$JS.API.DIRECT.GET.KV_{bucket}.>",
        f"$JS.API.CONSUMER.CREATE.KV_{bucket}.>",
    ]


def _kv_read(bucket: str) -> list[str]:
    """Reading keys of a bucket one by one, writing none."""
    return [
        f"$JS.API.STREAM.INFO.KV_{bucket}",
        f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
        f"$JS.API.DIRECT.GET.KV_{bucket}.>",
    ]


def _keys_read(bucket: str, keys: str) -> list[str]:
    """Reading some keys of another stage's bucket, writing none. A direct get names its key in the subject;
    a stream message get (a bucket without direct gets) cannot be narrowed to keys, so it reads the bucket."""
    return [
        f"$JS.API.STREAM.INFO.KV_{bucket}",
        f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
        f"$JS.API.DIRECT.GET.KV_{bucket}.$KV.{bucket}.{keys}",
    ]


#: Keys of other stages' buckets a stage reads, by Settings: (bucket, keys). Ingest follows the on-air
#: stage's current show (``show.<stream>``), which scopes its answer cache.
KEYS_READ: dict[str, Callable[[Settings], tuple[tuple[str, str], ...]]] = {
    INGEST: lambda settings: ((settings.onair_kv_bucket, "show.>"),),
}


def _reading(stream: str) -> list[str]:
    """Ordered or durable consumers of one's own on ``stream`` (an overlay, a replay, a report)."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _stages_durables_on(stream: str, stages: Sequence[Stage]) -> list[str]:
    """Denied to readers of ``stream``: a reader could otherwise take, delete or redefine a stage's consumer."""
    out = []
    for stage in stages:
        if stage.consumes is not None and stage.consumes.stream == stream:
            d = stage.durable
            out += [
                f"$JS.API.CONSUMER.*.{stream}.{d}",
                f"$JS.API.CONSUMER.*.{stream}.{d}.>",
                f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{d}",
                f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{d}",
                f"$JS.ACK.{stream}.{d}.>",
            ]
    return out


def _reader(
    user: str,
    streams: tuple[str, ...],
    stages: Sequence[Stage],
    *,
    publish: tuple[str, ...] = (),
    subscribe: tuple[str, ...] = (),
) -> Permissions:
    allow = list(publish)
    deny: list[str] = []
    for stream in streams:
        allow += _reading(stream)
        deny += _stages_durables_on(stream, stages)
    if "$JS.API.STREAM.NAMES" not in allow:
        allow.append("$JS.API.STREAM.NAMES")  # a subscribe without a stream name looks the stream up
    return Permissions(tuple(allow), (f"{inbox_of(user)}.>", *subscribe), tuple(deny))


def stage_user(stage: Stage, settings: Settings, stages: Sequence[Stage] = ()) -> Permissions:
    """What one stage's user may do: publish its declared subjects, pull its consumer, read what it
    declares in ``reads`` through consumers of its own (never another stage's, of ``stages``), use its buckets."""
    allow = [*stage.published, *STREAM_DECLARE]
    deny: list[str] = []
    if stage.consumes is not None:
        allow += _durable(stage.consumes.stream, stage.durable)
    for stream in dict.fromkeys(read.stream for read in stage.reads):
        allow += _reading(stream)
        deny += _stages_durables_on(stream, [other for other in stages if other is not stage])
    for bucket in stage.kv_buckets(settings):
        allow += _kv(bucket)
    for bucket, keys in KEYS_READ.get(stage.name, lambda _: ())(settings):
        allow += _keys_read(bucket, keys)
    if stage.model_setting:  # a model endpoint's slots shared by the stages (KOTAE_MODEL_ENDPOINT_CONCURRENCY)
        allow += _kv(MODEL_SLOTS_BUCKET)
    if stage.watches_consumers:  # consumer information only: listing creates, takes or changes nothing
        allow += [f"$JS.API.CONSUMER.LIST.{s}" for s in dict.fromkeys(o.consumes.stream for o in stages if o.consumes)]
    return Permissions(tuple(dict.fromkeys(allow)), (f"{inbox_of(stage.name)}.>",), tuple(deny))


def operator_user(stages: Sequence[Stage], settings: Settings) -> Permissions:
    """The operator's commands (on the subjects that name it as their sender) and the status of the
    stages that take commands (those that read the control stream: their buckets, read only)."""
    allow = [subjects.control_from(OPERATOR), "$JS.API.INFO"]
    for stage in stages:
        if any(read.stream == subjects.STREAM_CONTROL for read in stage.reads):
            for bucket in stage.kv_buckets(settings):
                allow += _kv_read(bucket)
    return Permissions(tuple(allow), (f"{inbox_of(OPERATOR)}.>",))


def service_users(stages: Sequence[Stage], settings: Settings) -> dict[str, Permissions]:
    """The users of deploy/ and of the embedded server: each stage, readers of the answers, the operator, ``streams``."""
    users = {stage.name: stage_user(stage, settings, stages) for stage in stages}
    # Overlays, TTS and other readers of the answers (and of what aired) only read, through consumers of their own.
    users[READER] = _reader(
        READER,
        (subjects.STREAM_ANSWERS, subjects.STREAM_ONAIR),
        stages,
        subscribe=(subjects.ANSWER_ALL, subjects.ONAIR_ALL),
    )
    users[OPERATOR] = operator_user(stages, settings)
    # `kotae streams` after an upgrade (a Job in deploy/k8s): the one service login that may change a stream.
    users[STREAMS] = Permissions(STREAM_ADMIN, (f"{inbox_of(STREAMS)}.>",))
    return users


def embedded_users(
    stages: Sequence[Stage], settings: Settings, *, admin: bool = False
) -> dict[str, Permissions | None]:
    """The service users plus those of the processes that run the embedded stack (``None``: unrestricted)."""
    users: dict[str, Permissions | None] = dict(service_users(stages, settings))
    readiness = tuple(
        f"$JS.API.CONSUMER.INFO.{stage.consumes.stream}.{stage.durable}"
        for stage in stages
        if stage.consumes is not None
    )
    users[STACK] = Permissions((*STREAM_ADMIN, *readiness), (f"{inbox_of(STACK)}.>",))
    ingest = users[INGEST]
    assert ingest is not None
    users[REPLAY] = _reader(REPLAY, OUTCOME_STREAMS, stages, publish=ingest.publish)
    users[REPORT] = _reader(REPORT, (subjects.STREAM_EVALUATIONS,), stages)
    if admin:
        users[ADMIN] = None
    return users
