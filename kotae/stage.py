"""What a stage is, declared once: its input, its outputs, its model, its handler, its resources.

Every stage's package exports one :class:`Stage`, and ``kotae.services.STAGES``
lists them. Everything else that needs to know the stages derives from that list:
the durable consumers, the NATS users and their permissions, AsyncAPI, the
processes ``kotae up`` runs, the CLI's choices, the deployment files, the benches.

Example (``services/reranker/__init__.py``)::

    STAGE = Stage(
        name="reranker",
        description="Keeps and orders the relevant documents among the retrieved ones.",
        consumes=Input(subjects.RETRIEVAL, RetrievalV1),
        outputs=(
            Output(subjects.RERANK, RerankV1, "Relevant documents, most relevant first."),
            Output(subjects.answer("unanswered"), AnswerV1, "No candidate was relevant."),
            FAILED,
        ),
        handler="kotae.services.reranker.handlers:build_handler",
        model_setting="reranker_model",
        resources=Resources(cpu="250m", memory="768Mi", cpu_limit="1", memory_limit="1536Mi", max_replicas=6),
    )

The handler module's ``build_handler(settings, bus)`` returns a :class:`Handler`:
a typed function from the input contract to the message(s) it produces. The bus
edge publishes each by its type to the declared subject.

A stage that is not "one durable consumer shared by replicas, one message at a
time" (the on-air stage: every replica reads every answer, holds a lease, runs a
clock, serves HTTP) names a ``service`` instead: ``module:function``, an async
function that runs for the life of the process with a :class:`ServiceContext`,
and lists in ``reads`` what it reads through consumers of its own (its NATS user
may create those, as the ``reader`` user may). ``on_request`` keeps it out of
``kotae up``/``demo``/``replay`` unless asked (``--<name>``), and says what those
commands do for it (:class:`OnRequest`): the options they take with the flag, what
``kotae up`` checks before it starts anything and prints once the stage runs.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from kotae.contracts import AnswerV1, subjects

if TYPE_CHECKING:
    from faststream.nats import NatsBroker
    from nats.js import JetStreamContext
    from opentelemetry.sdk.trace import TracerProvider

    from kotae.settings import Settings

In = TypeVar("In", bound=BaseModel)

#: What a handler returns: one message, several (published in order), or nothing.
Produced = BaseModel | Sequence[BaseModel] | None


@dataclass(frozen=True)
class Endpoint:
    """A subject, the contract of the messages on it, and what they are for."""

    subject: str
    contract: type[BaseModel]
    description: str = ""

    @property
    def stream(self) -> str:
        return subjects.stream_of(self.subject)


class Input(Endpoint):
    """A subject a stage takes in.

    As a stage's ``consumes``: through its durable pull consumer. In its ``reads``:
    through consumers of its own, so every replica sees every message.
    """


class Output(Endpoint):
    """A subject a stage publishes."""


#: The explicit ``failed`` outcome a comment gets when its retries at a stage run out.
FAILED = Output(subjects.answer("failed"), AnswerV1, "Retries used up (e.g. the model stayed unavailable): the reason.")


@dataclass(frozen=True)
class Resources:
    """What one process of the stage asks of a Kubernetes node, and how far KEDA scales it on lag."""

    cpu: str = "100m"
    memory: str = "256Mi"
    cpu_limit: str = "1"
    memory_limit: str = "512Mi"
    min_replicas: int = 1
    max_replicas: int = 4
    lag_per_replica: int = 20


@dataclass(frozen=True)
class ExtraPort:
    """A port a stage serves besides its /metrics, and the setting that turns it on."""

    name: str
    setting: str  # environment variable, e.g. KOTAE_EVALUATOR_METRICS_PORT
    port: int  # in a container


@dataclass(frozen=True)
class Option:
    """A command-line option of ``kotae up``/``demo``/``replay`` that comes with a stage they run on request.

    Its value reaches every process of the stage as the variable ``env`` (a setting of theirs).
    """

    flag: str  # e.g. "--show"
    env: str  # e.g. "KOTAE_ONAIR_SHOW"
    help: str
    metavar: str | None = None
    #: A file or folder: passed on as an absolute path, so a process started in another folder finds it.
    path: bool = False
    #: ``module:function`` returning the value when the option is not given (e.g. a new show's id); None: unset.
    default: str | None = None

    @property
    def dest(self) -> str:
        """The attribute argparse gives it (``--speech-dir`` -> ``speech_dir``)."""
        return self.flag.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class OnRequest:
    """What ``kotae up``/``demo``/``replay`` do for a stage they run only when asked (``--<name>``).

    ``prepare`` (``module:function(settings) -> object``) runs in ``kotae up`` before anything
    starts: it raises :class:`StartRefused` for what may not start as configured, and returns what
    ``announce`` needs. ``announce`` (``module:function(settings, env, processes, prepared) ->
    list[str]``) gives the lines ``kotae up`` prints once the stage runs (where its pages are).
    A demo or a replay lets the stage's extra ports (``extra_ports``) take any free port unless
    their variable is set: nothing needs a stable address there.
    """

    options: tuple[Option, ...] = ()
    prepare: str | None = None
    announce: str | None = None

    def run_prepare(self, settings: Settings) -> Any:
        return _load(self.prepare)(settings) if self.prepare else None

    def run_announce(self, settings: Settings, env: dict[str, str], processes: int, prepared: Any) -> list[str]:
        return list(_load(self.announce)(settings, env, processes, prepared)) if self.announce else []

    def default_of(self, option: Option) -> str | None:
        return str(_load(option.default)()) if option.default else None


class StartRefused(RuntimeError):
    """A stage may not start as configured; the message says what to set."""


def _load(reference: str) -> Any:
    """The attribute a ``module:name`` reference names, its module imported now."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


class Bus:
    """What a handler may ask of the bus besides its input: the JetStream context (key-value stores)."""

    def __init__(self, jetstream: Callable[[], JetStreamContext]) -> None:
        self._jetstream = jetstream

    def jetstream(self) -> JetStreamContext:
        return self._jetstream()


@dataclass(frozen=True)
class Handler(Generic[In]):
    """A stage's work on one input message.

    ``handle`` returns the message(s) to publish. ``give_up``, when the input's
    deliveries run out (a model that stays down), returns the comment's terminal
    outcome; without one the comment gets the ``failed`` outcome with the reason.
    ``stored`` is told of each output once its stream stored it; ``start`` runs
    once the process is connected, before the first message; ``close`` releases
    what the handler holds when the stage stops.
    """

    handle: Callable[[In], Awaitable[Produced]]
    give_up: Callable[[In, str], Awaitable[Produced]] | None = None
    stored: Callable[[BaseModel], Awaitable[None]] | None = None
    start: Callable[[], Awaitable[None]] | None = None
    close: Callable[[], Awaitable[None]] | None = None


HandlerFactory = Callable[["Settings", Bus], Handler[Any]]


@dataclass
class ServiceContext:
    """What a stage's ``service`` gets from its process: the connected broker, and two signals.

    The service sets ``ready`` once it is doing its work (the stack waits for it) and
    returns soon after ``stopping`` is set (SIGTERM), within the graceful timeout.
    """

    broker: NatsBroker
    tracer_provider: TracerProvider
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def jetstream(self) -> JetStreamContext:
        return self.broker.connection.jetstream()


Service = Callable[["Settings", ServiceContext], Awaitable[None]]


@dataclass(frozen=True)
class Stage:
    """One stage, declared once (see the module docstring)."""

    name: str
    description: str
    outputs: tuple[Output, ...]
    #: ``module:function`` building the :class:`Handler`; imported only when the stage runs.
    handler: str | None = None
    consumes: Input | None = None
    #: The Settings field naming the chat model the stage calls, if any (e.g. ``reranker_model``).
    model_setting: str | None = None
    resources: Resources = field(default_factory=Resources)
    #: JetStream key-value buckets the stage reads and writes, by Settings (some names are settings).
    kv_buckets: Callable[[Settings], tuple[str, ...]] = lambda _: ()
    extra_ports: tuple[ExtraPort, ...] = ()
    #: The Settings field with the niceness a process of this stage adds to itself (work that can wait).
    nice_setting: str | None = None
    #: ``module:function`` of a long-running service (see the module docstring), instead of a handler.
    service: str | None = None
    #: Subjects read through consumers of the stage's own, every replica all of them (its user may create those).
    reads: tuple[Input, ...] = ()
    #: Run by ``kotae up``/``demo``/``replay`` only when asked (``--<name>``), as this says; deployed like the others.
    on_request: OnRequest | None = None
    #: Lists every stage's durable consumer (its lag, its waiting pull requests) to show an operator the
    #: stages' health; its NATS user may read that consumer information, and nothing else of theirs.
    watches_consumers: bool = False

    def __post_init__(self) -> None:
        if self.service is not None and (self.handler is not None or self.consumes is not None):
            raise TypeError(f"stage {self.name}: a service stage neither consumes nor has a handler")

    @property
    def runs_as_process(self) -> bool:
        """Whether it runs as processes of its own: a stage that consumes, or runs a service (ingest does neither)."""
        return self.consumes is not None or self.service is not None

    @property
    def durable(self) -> str:
        """The durable consumer every replica of the stage binds."""
        return self.name

    @property
    def published(self) -> tuple[str, ...]:
        """Every subject the stage may publish: its outputs and its dead letters."""
        own = [o.subject for o in self.outputs]
        if self.consumes is not None:
            own.append(subjects.deadletter(self.name))
        return tuple(sorted(set(own)))

    def build_handler(self, settings: Settings, bus: Bus) -> Handler[Any]:
        if self.handler is None:
            raise TypeError(f"stage {self.name} consumes nothing, so it has no handler")
        module, _, function = self.handler.partition(":")
        factory: HandlerFactory = getattr(importlib.import_module(module), function)
        return factory(settings, bus)

    def load_service(self) -> Service:
        if self.service is None:
            raise TypeError(f"stage {self.name} runs no service")
        module, _, function = self.service.partition(":")
        return getattr(importlib.import_module(module), function)


def by_name(stages: Sequence[Stage]) -> dict[str, Stage]:
    return {stage.name: stage for stage in stages}


@dataclass(frozen=True)
class Hop:
    """One stage on the way from a comment to its answer: what it takes and what it passes on."""

    stage: Stage
    takes: str  # subject
    passes: str  # subject of its non-answer output, or the answers' when it is the last hop


def hot_path(stages: Sequence[Stage]) -> list[Hop]:
    """The stages a comment passes through to its answer, in order, derived from what each consumes and publishes.

    It starts at the stage that consumes comments and follows each stage's one
    output that is not an answer; the stage whose outputs are all answers is the last.
    """
    consumers = {stage.consumes.subject: stage for stage in stages if stage.consumes is not None}
    hops: list[Hop] = []
    subject = subjects.COMMENT
    while subject in consumers and len(hops) < len(stages):
        stage = consumers[subject]
        onward = [o.subject for o in stage.outputs if not o.subject.startswith(subjects.ANSWER_PREFIX + ".")]
        passes = onward[0] if onward else subjects.ANSWER_PREFIX
        hops.append(Hop(stage, subject, passes))
        if not onward:
            break
        subject = onward[0]
    return hops
