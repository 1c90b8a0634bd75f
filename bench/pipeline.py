"""Capacity: many comments in flight, against the floor and against a one-at-a-time pipeline.

    python bench/pipeline.py [--comments 1500] [--rate 60] [--latency-ms 500] [--soak-min 0] [--write]

One run, on this machine:

1. **pipeline** — the real stack (nats-server, every stage its own process). The
   reranker, generator and verifier call a local fake model server (its own
   process) that answers after ``--latency-ms`` (three hot-path calls a comment).
   ``--comments`` answerable comments arrive at ``--rate`` per second. Printed:
   sustained comments/s, end-to-end latency p50/p95/p99, the latency kotae itself
   adds per stage (time from a stage's input to its output, minus that stage's
   model calls), CPU seconds and peak RSS per process, consumer lag over time (PNG).
2. **floor** — raw nats-py: the same messages through the same number of
   JetStream hops (publish, pull, ack, publish the next) doing no work, on a server
   of its own, at the sustained rate and at ``--quiet-rate``; each hop a process of
   its own, as each stage is (the ratios' base), and, for reference, the hops as
   tasks of one process. The floor at the sustained rate runs right after the
   pipeline, and then ``--hop-rounds`` more times, each after a pipeline run of
   ``--hop-comments``: the per-hop ratio is also shown pair by pair, both sides
   measured within a minute of each other on this shared machine; and, in each
   round, both at once (the floor's hops then wait for the cores as the stages do).
   Every process of the run, this one included, uses the event loop the stages use
   (KOTAE_EVENT_LOOP).
3. **one at a time** — the same stage logic called in sequence in one process for
   each comment, the way a single web handler would.
4. **scaling** — a CPU-bound stage as the bottleneck (the retriever embedding
   every comment with e5; comments ``--scale-chars`` long and unique, so nothing
   is cached; every other stage offline; comments as fast as they can be
   published): throughput with 1, 2 and 3 retriever replicas, beside the bound
   the machine's cores put on it given the other processes' CPU per comment.
   ``--scale-rounds`` rounds in one stack (1, 2, 3 then 3, 2, 1 replicas), each
   round's ratios over its own one-replica run, medians shown.
5. ``--soak-min N`` — N minutes at the sustained rate, RSS of every process
   sampled; growth = RSS at the end vs after the first minute.

Ratios between these, from the same run, are the result; absolute numbers depend
on the machine (printed with it). ``--write`` puts this run's tables into the
capacity section of docs/benchmarks.md, between its markers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import nats  # noqa: E402
from machine import describe  # noqa: E402
from nats.js.api import ConsumerConfig, DeliverPolicy  # noqa: E402

import kotae.samples  # noqa: E402
from kotae.contracts import AnswerV1, CommentV1, DraftV1, RerankV1, RetrievalV1, subjects  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import load_records  # noqa: E402
from kotae.runtime import run_loop  # noqa: E402
from kotae.services import STAGES as DECLARED  # noqa: E402
from kotae.settings import Settings, load_settings  # noqa: E402
from kotae.stack import Stack  # noqa: E402
from kotae.stage import by_name, hot_path  # noqa: E402

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Capacity (`bench/pipeline.py`)"
BEGIN, END = "<!-- bench/pipeline.py --write: begin -->", "<!-- bench/pipeline.py --write: end -->"
#: The stages a comment passes through to its answer, and what each takes and passes on.
HOPS = hot_path(DECLARED)
HOT_STAGES = tuple(hop.stage.name for hop in HOPS)


def kind_of(subject: str) -> str:
    """``kotae.rerank.v1`` -> ``rerank.v1``: the schema version a subject's messages carry."""
    return subject.removeprefix(subjects.PREFIX + ".")


def consumer_of(stage: str) -> tuple[str, str]:
    declared = by_name(DECLARED)[stage]
    assert declared.consumes is not None
    return declared.consumes.stream, declared.durable


SOAK_HEADER = ["process", "RSS at 1 min MB", "RSS at half-time MB", "RSS at end MB", "end vs 1 min", "end vs half-time"]


# --- the fake model server, in its own process ---------------------------------------

FAKE = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
os.nice(int(sys.argv[3]))
from tests.fakes.model_server import FakeModelServer, stage_responder

with FakeModelServer(responder=stage_responder, delay_s=float(sys.argv[2])) as fake:
    print(fake.url, flush=True)
    while True:
        time.sleep(3600)
"""


def start_fake_model(latency_s: float, nice: int = 0) -> tuple[subprocess.Popen[str], str]:
    """The fake model server in a process of its own, at ``nice`` (it stands in for a hosted API on other machines)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE, str(ROOT), str(latency_s), str(nice)], stdout=subprocess.PIPE, text=True
    )
    url = proc.stdout.readline().strip() if proc.stdout else ""
    if not url.startswith("http"):
        proc.kill()
        raise RuntimeError("the fake model server did not start")
    return proc, url


# --- comments ------------------------------------------------------------------------


def questions() -> list[str]:
    lines = (Path(kotae.samples.__file__).parent / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [q["text"] for q in map(json.loads, lines) if q["kind"] == "answerable"]


def comment(i: int, text: str, run: str) -> CommentV1:
    lang = "en" if text.isascii() else "ja"
    return CommentV1(
        comment_id=f"{run}-{i}",
        stream_id="bench",
        author=f"viewer-{i % 97}",
        text=text,
        normalized=text,
        lang=lang,
        published_at=datetime.now(UTC),
    )


# --- process accounting (/proc) -------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except OSError:
        return float("nan")


def steal_seconds() -> float:
    """CPU time the hypervisor gave to other guests while this machine's processes wanted it (all cores)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) / _TICK
    except (OSError, IndexError, ValueError):
        return float("nan")


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


DRIVER = "driver (this process)"


def processes(stack: Stack) -> dict[str, int]:
    out = {f"{stage}-{i}": p.pid for stage, procs in stack.processes.items() for i, p in enumerate(procs)}
    if stack.server and stack.server.process:
        out["nats-server"] = stack.server.process.pid
    out[DRIVER] = os.getpid()
    return out


# --- driving the stack ---------------------------------------------------------------


@dataclass
class Run:
    sent: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    answers: dict[str, AnswerV1] = field(default_factory=dict)
    lag: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.done) / max(1e-9, self.finished - self.started)

    def latencies(self) -> list[float]:
        return sorted(self.done[c] - self.sent[c] for c in self.done)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def drive(url: str, comments: list[CommentV1], rate: float, *, timeout: float, watch_lag: bool = True) -> Run:
    """Publish ``comments`` at ``rate`` per second (0: as fast as possible) and wait for every outcome."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    run = Run()
    all_done = asyncio.Event()
    wanted = {c.comment_id for c in comments}

    async def on_answer(msg: Any) -> None:
        answer = AnswerV1.model_validate_json(msg.data)
        if answer.comment_id in wanted and answer.comment_id not in run.done:
            run.done[answer.comment_id] = time.time()
            run.answers[answer.comment_id] = answer
            if len(run.done) == len(wanted):
                all_done.set()

    last = (await js.stream_info(subjects.STREAM_ANSWERS)).state.last_seq
    sub = await js.subscribe(
        subjects.ANSWER_ALL,
        cb=on_answer,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=last + 1),
    )

    async def sample_lag() -> None:
        while not all_done.is_set():
            row = {}
            for stage in HOT_STAGES:
                info = await js.consumer_info(*consumer_of(stage))
                row[stage] = (info.num_pending or 0) + (info.num_ack_pending or 0)
            run.lag.append((time.time() - run.started, row))
            await asyncio.sleep(0.5)

    run.started = time.time()
    sampler = asyncio.create_task(sample_lag()) if watch_lag else None
    interval = 1.0 / rate if rate > 0 else 0.0
    for i, c in enumerate(comments):
        if interval:
            delay = run.started + i * interval - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
        c = c.model_copy(update={"created_at": datetime.now(UTC)})
        run.sent[c.comment_id] = time.time()
        await js.publish(
            subjects.COMMENT, c.model_dump_json().encode(), headers={"Nats-Msg-Id": f"{c.comment_id}:{c.message_id}"}
        )
    try:
        await asyncio.wait_for(all_done.wait(), timeout)
    except TimeoutError:
        print(f"# {len(wanted) - len(run.done)} comments without an outcome after {timeout:.0f}s", file=sys.stderr)
    run.finished = max(run.done.values(), default=time.time())
    if sampler:
        sampler.cancel()
    await sub.unsubscribe()
    await nc.close()
    return run


async def hop_times(url: str, ids: set[str]) -> dict[str, list[float]]:
    """Per stage, seconds from its input message's creation to its output's, minus its model calls."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    created: dict[tuple[str, str], datetime] = {}
    models = {"retrieval.v1": RetrievalV1, "rerank.v1": RerankV1, "draft.v1": DraftV1}
    sub = await js.subscribe(
        ">", stream=subjects.STREAM_PIPELINE, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    while True:
        try:
            msg = await sub.next_msg(timeout=2)
        except (TimeoutError, nats.errors.TimeoutError):
            break
        kind = json.loads(msg.data).get("schema_version")
        message = models[kind].model_validate_json(msg.data)
        if message.comment_id in ids:
            created[(message.comment_id, kind)] = message.created_at
            created[(message.comment_id, "comment.v1")] = message.comment.created_at
    await nc.close()
    return created  # type: ignore[return-value]


async def run_and_hops(url: str, comments: list[CommentV1], rate: float) -> tuple[Run, dict[str, list[float]]]:
    """Drive ``comments`` through the pipeline at ``rate``; the run and the latency each stage added."""
    run = await drive(url, comments, rate, timeout=120 + 4 * len(comments) / rate, watch_lag=False)
    return run, added_latency(await hop_times(url, set(run.done)), run.answers)


def added_latency(created: dict[tuple[str, str], datetime], answers: dict[str, AnswerV1]) -> dict[str, list[float]]:
    chain = [(hop.stage.name, kind_of(hop.takes), kind_of(hop.passes)) for hop in HOPS]
    out: dict[str, list[float]] = {stage: [] for stage, _, _ in chain}
    for cid, answer in answers.items():
        stamps = {kind: created.get((cid, kind)) for kind in ("comment.v1", "retrieval.v1", "rerank.v1", "draft.v1")}
        stamps["answer.v1"] = answer.created_at
        for stage, a, b in chain:
            if stamps[a] is None or stamps[b] is None:
                continue
            model_s = sum((c.latency_ms or 0) for c in answer.model_calls if c.stage == stage) / 1000
            out[stage].append((stamps[b] - stamps[a]).total_seconds() - model_s)
    return out


@dataclass
class HopRound:
    """One pipeline run at the sustained rate and the floor measured with it (right after, or at the same time)."""

    name: str
    comments: int
    added: dict[str, float]  # stage -> added p50, seconds
    floor: float  # the floor's per-hop p50, seconds

    def ratio(self, stage: str) -> float:
        return self.added[stage] / self.floor if self.floor > 0 else float("nan")


def hop_p50s(added: dict[str, list[float]]) -> dict[str, float]:
    return {stage: pct(sorted(values), 0.5) for stage, values in added.items()}


#: The stage that takes comments: the retrieval gate, the one that embeds each comment.
GATE = HOT_STAGES[0]
#: Every hop after the retrieval gate calls a model when one is configured.
MODEL_STAGES = HOT_STAGES[1:]


def rounds_table(rounds: list[HopRound]) -> str:
    """Each pair's added latency per stage, floor hop and ratios, with their medians."""
    rows = [
        [
            r.name,
            str(r.comments),
            *(f"{1000 * r.added[s]:.1f}" for s in HOT_STAGES),
            f"{1000 * r.floor:.2f}",
            *(f"{r.ratio(s):.1f}×" for s in MODEL_STAGES),
        ]
        for r in rounds
    ]
    medians = {s: statistics.median(r.ratio(s) for r in rounds) for s in MODEL_STAGES}
    rows.append(
        [
            "median",
            "",
            *("" for _ in HOT_STAGES),
            f"{1000 * statistics.median(r.floor for r in rounds):.2f}",
            *(f"{medians[s]:.1f}×" for s in MODEL_STAGES),
        ]
    )
    return table(
        [
            "pipeline run",
            "comments",
            *(f"{s} added p50 ms" for s in HOT_STAGES),
            "floor hop p50 ms",
            *(f"{s} ÷ floor" for s in MODEL_STAGES),
        ],
        rows,
    )


# --- the floor: raw JetStream hops doing no work ---------------------------------------


async def floor_hop(
    js: Any, name: str, h: int, hops: int, wanted: int, per_hop: list[float], finished: list[float]
) -> None:
    """One floor hop: pull, note the latency since the previous publish, publish to the next hop, ack."""
    psub = await js.pull_subscribe(f"floor.{name}.{h}", durable=f"hop{h}", stream=name)
    seen = 0
    while seen < wanted:
        try:
            msgs = await psub.fetch(64, timeout=0.5)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        for m in msgs:
            now = time.time()
            per_hop.append(now - float(m.headers["t"]))
            seen += 1
            if h + 1 < hops:
                await js.publish(f"floor.{name}.{h + 1}", m.data, headers={"t": repr(now)})
            else:
                finished.append(now)
            await m.ack()


async def floor_hop_process(url: str, name: str, h: int, hops: int, wanted: int, out: str) -> None:
    """``floor_hop`` as a process of its own (``--floor-hop``): results written to ``out`` as JSON."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    per_hop: list[float] = []
    finished: list[float] = []
    hop = asyncio.create_task(floor_hop(js, name, h, hops, wanted, per_hop, finished))
    await asyncio.sleep(0.2)  # the pull subscription exists before the driver publishes
    print("ready", flush=True)
    await hop
    await nc.close()
    Path(out).write_text(json.dumps({"per_hop": per_hop, "finished": finished}))


async def _floor_processes(
    url: str, name: str, hops: int, wanted: int, outs: list[Path]
) -> list[subprocess.Popen[str]]:
    """One process per floor hop (``--floor-hop``), returned once each says it is listening."""
    workers = []
    for h in range(hops):
        argv = [sys.executable, __file__, "--floor-hop", url, name, str(h), str(hops), str(wanted), str(outs[h])]
        workers.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    for w in workers:
        if (await asyncio.to_thread(w.stdout.readline)).strip() != "ready":  # type: ignore[union-attr]
            raise RuntimeError("a floor hop process did not start")
    return workers


async def _publish_paced(js: Any, subject: str, payloads: list[bytes], rate: float) -> float:
    """Publish ``payloads`` at ``rate`` a second (0: at once), each stamped with its time; returns the start."""
    started = time.time()
    interval = 1.0 / rate if rate > 0 else 0.0
    for i, data in enumerate(payloads):
        if interval:
            delay = started + i * interval - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
        await js.publish(subject, data, headers={"t": repr(time.time())})
    return started


async def floor(
    url: str,
    payloads: list[bytes],
    rate: float,
    hops: int = 4,
    *,
    processes: bool = True,
    ready: asyncio.Event | None = None,
) -> tuple[float, list[float]]:
    """Throughput and per-hop latency of ``hops`` publish→pull→ack→publish steps with no work.

    With ``processes`` every hop is a process of its own, as every stage is in the
    pipeline (a hop then crosses processes, each waking on its own socket); without,
    the hops are tasks of this process on one connection. ``ready`` is set when the
    hops are listening and the first message is about to go.
    """
    nc = await nats.connect(url)
    js = nc.jetstream()
    name = f"FLOOR_{uuid.uuid4().hex[:6]}"
    await js.add_stream(name=name, subjects=[f"floor.{name}.>"])
    per_hop: list[float] = []
    finished: list[float] = []
    workers: list[subprocess.Popen[str]] = []
    tasks: list[asyncio.Task[None]] = []
    outs = [Path(tempfile.gettempdir()) / f"{name}-{h}.json" for h in range(hops)]
    try:
        if processes:
            workers = await _floor_processes(url, name, hops, len(payloads), outs)
        else:
            tasks = [
                asyncio.create_task(floor_hop(js, name, h, hops, len(payloads), per_hop, finished)) for h in range(hops)
            ]
            await asyncio.sleep(0.5)
        if ready is not None:
            ready.set()
        started = await _publish_paced(js, f"floor.{name}.0", payloads, rate)
        if processes:
            for w in workers:
                await asyncio.to_thread(w.wait, 120)
            for out in outs:
                result = json.loads(out.read_text())
                per_hop += result["per_hop"]
                finished += result["finished"]
        else:
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        for t in tasks:
            t.cancel()
        for out in outs:
            out.unlink(missing_ok=True)
        await js.delete_stream(name)
        await nc.close()
    return len(finished) / max(1e-9, max(finished, default=started) - started), sorted(per_hop)


# --- one at a time ---------------------------------------------------------------------


async def one_at_a_time(settings: Settings, texts: list[str], n: int) -> float:
    """Comments per second when each comment runs every stage's logic in sequence in this process."""
    from kotae.providers import ChatModel
    from kotae.services.generator.model import model_answer
    from kotae.services.generator.persona import load_persona
    from kotae.services.reranker.logic import model_rerank
    from kotae.services.retriever.logic import Retriever
    from kotae.services.verifier.model import model_verify

    retriever = Retriever(settings)
    ranker = ChatModel.from_settings(settings, settings.reranker_model or "", setting="KOTAE_RERANKER_MODEL")
    writer = ChatModel.from_settings(settings, settings.generator_model or "", setting="KOTAE_GENERATOR_MODEL")
    checker = ChatModel.from_settings(settings, settings.verifier_model or "", setting="KOTAE_VERIFIER_MODEL")
    persona = load_persona(settings.persona_file)
    try:
        started = time.perf_counter()
        for i in range(n):
            c = comment(i, texts[i % len(texts)], "seq")
            found = retriever.retrieve(c.normalized, kb=settings.kb, day=c.published_at.date())
            gate, ranking, writing = (hop.stage.name for hop in HOPS[:3])
            retrieval = c.forward(
                RetrievalV1,
                stage=gate,
                method=found.method,
                gate=found.gate,
                top_score=found.top_score,
                docs=found.docs,
                faq=found.faq,
            )
            ranked = await model_rerank(retrieval, ranker, n=settings.top_n, reask=0, final_attempt=True)
            rerank = retrieval.forward(
                RerankV1, stage=ranking, method=ranked.method, docs=ranked.docs, faq=ranked.faq, slide=ranked.slide
            )
            draft = await model_answer(c, rerank, writer, persona, max_sentences=settings.max_answer_sentences)
            draft_msg = rerank.forward(
                DraftV1,
                stage=writing,
                method=draft.method,
                docs=rerank.docs,
                faq=rerank.faq,
                answer=draft.answer,
                speech=draft.speech,
                citations=draft.citations,
                citation_check=draft.check,
            )
            await model_verify(draft_msg, checker, reask=0)  # the evaluator is off the hot path in both designs
        return n / (time.perf_counter() - started)
    finally:
        for model in (ranker, writer, checker):
            await model.aclose()


# --- reporting -------------------------------------------------------------------------


def lag_png(run: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for stage in HOT_STAGES:
        ax.plot([t for t, _ in run.lag], [row[stage] for _, row in run.lag], label=stage)
    ax.set_xlabel("seconds since the first comment")
    ax.set_ylabel("messages waiting or in flight")
    ax.set_title("Consumer lag during the pipeline run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# --- main ------------------------------------------------------------------------------


def env_for(settings_env: dict[str, str]) -> None:
    for key, value in settings_env.items():
        os.environ[key] = value


async def soak_only(args: argparse.Namespace) -> str:
    """Just the soak: the pipeline at ``--rate`` for ``--soak-min`` minutes, RSS per process."""
    work = Path(tempfile.mkdtemp(prefix="kotae-soak-"))
    fake, fake_url = start_fake_model(args.latency_ms / 1000, args.fake_nice)
    base = f"compatible:{fake_url}/v1|"
    env_for(
        {
            "KOTAE_RERANKER_MODEL": base + "ranker",
            "KOTAE_GENERATOR_MODEL": base + "writer",
            "KOTAE_VERIFIER_MODEL": base + "checker",
            "KOTAE_INFLIGHT": str(args.inflight),
            "KOTAE_MODEL_CONCURRENCY": str(args.inflight),
            "KOTAE_LOG_LEVEL": "warning",
            "KOTAE_MODEL_TIMEOUT_S": "30",
            "KOTAE_DATA_DIR": str(work),
        }
    )
    try:
        settings = load_settings()
        load_knowledge_base(load_records(Path(kotae.samples.__file__).parent / "kb"), "default", settings)
        stack = Stack(settings)
        url = await stack.start()
        rows = await soak(url, stack, questions(), args)
        stack.stop()
    finally:
        fake.kill()
    return "\n".join(
        [
            f"Machine: {describe()}",
            "",
            f"Soak: {args.soak_min:g} min at {args.rate:g}/s, model calls {args.latency_ms} ms; RSS of every process:",
            "",
            table(SOAK_HEADER, rows),
        ]
    )


async def main_async(args: argparse.Namespace) -> str:
    if args.soak_only:
        return await soak_only(args)
    if args.scaling_only:
        rows = await scale_stage(Path(tempfile.mkdtemp(prefix="kotae-scale-")), questions(), args)
        return f"Machine: {describe()}\n\n" + scaling_table(rows)
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]  # uvloop or asyncio (KOTAE_EVENT_LOOP)
    out: list[str] = [f"Machine: {describe()}; event loop of every process: {loop}", ""]
    work = Path(tempfile.mkdtemp(prefix="kotae-capacity-"))
    fake, fake_url = start_fake_model(args.latency_ms / 1000, args.fake_nice)
    base = f"compatible:{fake_url}/v1|"
    model_env = {
        "KOTAE_RERANKER_MODEL": base + "ranker",
        "KOTAE_GENERATOR_MODEL": base + "writer",
        "KOTAE_VERIFIER_MODEL": base + "checker",
        "KOTAE_INFLIGHT": str(args.inflight),
        "KOTAE_MODEL_CONCURRENCY": str(args.inflight),
        "KOTAE_LOG_LEVEL": "warning",
        "KOTAE_MODEL_TIMEOUT_S": "30",
    }
    texts = questions()
    started: list[Stack] = []  # stopped whatever happens
    try:
        # 1. the pipeline
        env_for({**model_env, "KOTAE_DATA_DIR": str(work / "pipeline")})
        settings = load_settings()
        load_knowledge_base(load_records(Path(kotae.samples.__file__).parent / "kb"), "default", settings)
        stack = Stack(settings)
        started.append(stack)
        url = await stack.start()
        # The fake model server shares the cores too (at --fake-nice, so kotae's processes come
        # first, as they would with the model on other machines): its CPU is shown, apart from kotae's.
        pids = {**processes(stack), "fake model server (not kotae)": fake.pid}
        cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
        wall0, steal0 = time.monotonic(), steal_seconds()
        run_id = uuid.uuid4().hex[:6]
        warm = [comment(i, texts[i % len(texts)], f"warm{run_id}") for i in range(40)]
        await drive(url, warm, 20, timeout=120, watch_lag=False)
        comments = [comment(i, texts[i % len(texts)], run_id) for i in range(args.comments)]
        run = await drive(url, comments, args.rate, timeout=max(120.0, 4 * args.comments / max(args.rate, 1)))
        cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
        wall, steal = time.monotonic() - wall0, steal_seconds() - steal0
        peak = {k: rss_mb(p, "VmHWM") for k, p in pids.items()}
        created = await hop_times(url, set(run.done))
        added = added_latency(created, run.answers)
        lat = run.latencies()
        outcomes = {
            o: sum(a.outcome == o for a in run.answers.values())
            for o in sorted({a.outcome for a in run.answers.values()})
        }
        lag_png(run, ROOT / "docs" / "capacity-lag.png")

        # 2. the floor, same payload size, same rate, four hops, measured right after the
        # pipeline and then in rounds with it, so that both meet the machine in the same state
        # (on a server of its own: beside the pipeline, the floor's hops would also pay for kotae's work)
        sample = comments[0].model_dump_json().encode()
        env_for({"KOTAE_DATA_DIR": str(work / "floor")})
        floor_stack = Stack(load_settings(), stages=())
        started.append(floor_stack)
        floor_url = floor_stack.start_server()
        # What the idle pipeline (its stages and server, not this driver) takes from the floor meanwhile.
        idle = [p for k, p in processes(stack).items() if k != DRIVER]
        idle0, floor_wall0 = sum(map(cpu_seconds, idle)), time.monotonic()
        floor_rate, floor_hops = await floor(floor_url, [sample] * args.comments, args.rate)
        idle_share = (sum(map(cpu_seconds, idle)) - idle0) / (time.monotonic() - floor_wall0)
        rounds = [HopRound("the run above", len(run.done), hop_p50s(added), pct(floor_hops, 0.5))]
        together: list[HopRound] = []
        for r in range(args.hop_rounds):
            batch = [comment(i, texts[i % len(texts)], f"round{r}{run_id}") for i in range(args.hop_comments)]
            short, short_added = await run_and_hops(url, batch, args.rate)
            _, short_floor = await floor(floor_url, [sample] * args.hop_comments, args.rate)
            rounds.append(HopRound(f"round {r + 1}", len(short.done), hop_p50s(short_added), pct(short_floor, 0.5)))
            batch = [comment(i, texts[i % len(texts)], f"both{r}{run_id}") for i in range(args.hop_comments)]
            floor_ready = asyncio.Event()
            beside = asyncio.create_task(floor(floor_url, [sample] * args.hop_comments, args.rate, ready=floor_ready))
            await floor_ready.wait()
            both, both_added = await run_and_hops(url, batch, args.rate)
            _, beside_hops = await beside
            together.append(HopRound(f"round {r + 1}", len(both.done), hop_p50s(both_added), pct(beside_hops, 0.5)))
        # The same stack with few comments in flight: what a hop costs without queueing for the cores.
        quiet_comments = [comment(i, texts[i % len(texts)], f"quiet{run_id}") for i in range(args.quiet_comments)]
        _, quiet_added = await run_and_hops(url, quiet_comments, args.quiet_rate)
        soak_rows: list[list[str]] = []
        if args.soak_min > 0:
            soak_rows = await soak(url, stack, texts, args)
        stack.stop()

        _, quiet_floor_hops = await floor(floor_url, [sample] * args.quiet_comments, args.quiet_rate)
        floor1_rate, floor1_hops = await floor(floor_url, [sample] * args.comments, args.rate, processes=False)
        _, quiet_floor1_hops = await floor(floor_url, [sample] * args.quiet_comments, args.quiet_rate, processes=False)
        floor_stack.stop()

        # 3. one at a time
        seq_rate = await one_at_a_time(settings, texts, args.sequential)

        # 4. scaling a CPU-bound stage
        scaling = await scale_stage(work, texts, args)
    finally:
        for running in started:
            running.stop()
        fake.kill()

    out += [
        f"Pipeline: {args.comments} answerable comments offered at {args.rate:g}/s; model calls (reranker, "
        f"generator, verifier) answer after {args.latency_ms} ms; KOTAE_INFLIGHT={args.inflight}.",
        "",
    ]
    hop_floor, hop_floor1 = pct(floor_hops, 0.5), pct(floor1_hops, 0.5)
    rows = [
        [
            "pipeline (every stage its own process)",
            f"{run.throughput:.1f}",
            f"{pct(lat, 0.5):.2f}",
            f"{pct(lat, 0.95):.2f}",
            f"{pct(lat, 0.99):.2f}",
        ],
        [
            "floor: raw JetStream, 4 hops, no work, each hop its own process",
            f"{floor_rate:.1f}",
            f"{4 * hop_floor:.3f}",
            f"{4 * pct(floor_hops, 0.95):.3f}",
            f"{4 * pct(floor_hops, 0.99):.3f}",
        ],
        [
            "floor with the 4 hops in one process",
            f"{floor1_rate:.1f}",
            f"{4 * hop_floor1:.3f}",
            f"{4 * pct(floor1_hops, 0.95):.3f}",
            f"{4 * pct(floor1_hops, 0.99):.3f}",
        ],
        ["one at a time (same logic, sequential, one process)", f"{seq_rate:.2f}", f"{1 / seq_rate:.2f}", "–", "–"],
    ]
    out += [table(["run", "comments/s", "e2e p50 s", "e2e p95 s", "e2e p99 s"], rows), ""]
    out += [
        f"Outcomes: {', '.join(f'{k} {v}' for k, v in outcomes.items())}; {len(run.done)}/{args.comments} ended.",
        f"Pipeline ÷ one at a time: {run.throughput / seq_rate:.1f}×.",
        "",
    ]
    quiet_floor, quiet_floor1 = pct(quiet_floor_hops, 0.5), pct(quiet_floor1_hops, 0.5)

    def ratio(value: float, base: float) -> str:
        return f"{value / base:.1f}×" if base > 0 else "–"

    hop_rows = []
    for stage in HOT_STAGES:
        values, calm = sorted(added[stage]), sorted(quiet_added[stage])
        busy_p50, calm_p50 = pct(values, 0.5), pct(calm, 0.5)
        hop_rows.append(
            [
                stage,
                f"{1000 * busy_p50:.1f}",
                f"{1000 * pct(values, 0.95):.1f}",
                ratio(busy_p50, hop_floor),
                ratio(busy_p50, hop_floor1),
                f"{1000 * calm_p50:.1f}",
                ratio(calm_p50, quiet_floor),
                ratio(calm_p50, quiet_floor1),
                f"{1000 * (cpu1[stage + '-0'] - cpu0[stage + '-0']) / len(run.done):.1f}",
            ]
        )
    out += [
        "Latency kotae adds per stage (input message created → output created, minus the stage's model calls), "
        "against the floor's per-hop latency at the same rate: each hop its own process, as in the pipeline "
        f"({1000 * hop_floor:.1f} ms p50 at {args.rate:g}/s, {1000 * quiet_floor:.1f} ms p50 at {args.quiet_rate:g}/s), "
        f"and the hops in one process ({1000 * hop_floor1:.1f} ms, {1000 * quiet_floor1:.1f} ms):",
        "",
    ]
    out += [
        table(
            [
                "stage",
                f"added p50 ms at {args.rate:g}/s",
                "added p95 ms",
                "p50 ÷ floor hop",
                "÷ one-process floor hop",
                f"added p50 ms at {args.quiet_rate:g}/s",
                "p50 ÷ floor hop",
                "÷ one-process floor hop",
                "CPU ms per comment",
            ],
            hop_rows,
        ),
        "",
    ]
    out += [
        f"The same ratio in time-matched pairs at {args.rate:g}/s (each pipeline run followed at once by the floor, "
        f"each hop its own process; then {args.hop_rounds} more pipeline runs of {args.hop_comments} comments, each "
        f"followed by the floor; meanwhile the idle pipeline's processes used {100 * idle_share:.1f}% of a core):",
        "",
        rounds_table(rounds),
        "",
    ]
    if together:
        out += [
            f"And with both at once: in each round, another {args.hop_comments} comments through the pipeline while "
            "the floor carries as many messages on its own server, both at the same rate, so the floor's hops wait "
            "for the cores as the stages do:",
            "",
            rounds_table(together),
            "",
        ]
    out += ["CPU and memory per process during the measured run (and its 40-comment warm-up):", ""]
    out += [
        table(["process", "CPU s", "peak RSS MB"], [[k, f"{cpu1[k] - cpu0[k]:.1f}", f"{peak[k]:.0f}"] for k in pids]),
        "",
    ]
    total_cpu = sum(cpu1[k] - cpu0[k] for k in pids)
    cores = os.cpu_count() or 1
    out += [
        f"All of them together: {total_cpu:.1f} CPU s over {wall:.1f} s, {100 * total_cpu / (wall * cores):.0f}% of "
        f"the {cores} cores; the hypervisor took {100 * steal / (wall * cores):.1f}% of them for other guests.",
        "",
    ]
    out += ["Consumer lag over the run: docs/capacity-lag.png.", ""]
    if scaling:
        out += [
            f"Scaling a CPU-bound stage: the retriever embedding each unique comment of {args.scale_chars}+ characters "
            f"with {args.scale_embedding} (every other stage offline; comments published as fast as possible); "
            f"{args.scale_rounds} rounds of {args.scale_comments} comments per replica count in one stack, "
            "ordered 1, 2, 3 then 3, 2, 1; medians over the rounds:",
            "",
        ]
        out += [scaling_table(scaling), ""]
    if soak_rows:
        out += [f"Soak: {args.soak_min} min at {args.rate:g}/s; RSS of every process:", ""]
        out += [table(SOAK_HEADER, soak_rows), ""]
    return "\n".join(out)


def long_comment(texts: list[str], i: int, chars: int, prefix: str) -> str:
    """A unique comment of at least ``chars`` characters: several sample questions in one line."""
    parts, k = [], i
    while sum(map(len, parts)) < chars:
        parts.append(texts[k % len(texts)])
        k += 7
    return " ".join(parts) + f" ({prefix}{i})"


@dataclass
class Scaled:
    replicas: int
    throughput: float
    bottleneck_ms: float  # CPU per comment of every retriever replica together
    rest_ms: float  # CPU per comment of every other process (stages, nats-server, this driver)
    round: int = 0

    def bound(self, cores: int) -> float:
        """Most this many replicas can give over one: ``cores`` shared by the bottleneck and the rest."""
        return min(self.replicas, cores * self.bottleneck_ms / (self.bottleneck_ms + self.rest_ms))


async def scale_stage(work: Path, texts: list[str], args: argparse.Namespace) -> list[Scaled]:
    """Throughput with 1, 2, 3 replicas of a CPU-bound retriever (e5 query embeddings), the rest offline.

    Each comment is unique (so no embedding comes from a cache) and ``--scale-chars``
    long: a long comment is what makes the retriever's embedding the bottleneck. On
    a machine with C cores, the other processes' CPU per comment (R) caps what
    replicas of a bottleneck costing B per comment can give at C·B/(B+R); that
    bound is printed beside the measurement.

    The machine is shared, and how fast it is drifts over minutes: measured one
    after the other, 1 and 2 replicas would compare two different machines. So one
    stack runs ``--scale-rounds`` rounds, replicas started and stopped between
    measurements, in the order 1, 2, 3 then 3, 2, 1 (a drift that is steady over a
    round pair weighs on every replica count alike); each round gives its own
    ratios over its own one-replica throughput, and the table shows their median.
    """
    env_for(
        {
            "KOTAE_DATA_DIR": str(work / "scale"),
            "KOTAE_RERANKER_MODEL": "",
            "KOTAE_GENERATOR_MODEL": "",
            "KOTAE_VERIFIER_MODEL": "",
            "KOTAE_INFLIGHT": "4",
            "KOTAE_EMBEDDING_MODEL": args.scale_embedding,
        }
    )
    settings = load_settings()
    load_knowledge_base(load_records(Path(kotae.samples.__file__).parent / "kb"), "default", settings)
    stack = Stack(settings, stages=HOT_STAGES)
    url = await stack.start()
    results = []
    try:
        for r in range(args.scale_rounds):
            for replicas in (1, 2, 3) if r % 2 == 0 else (3, 2, 1):
                await set_replicas(stack, url, GATE, replicas)
                run_id = uuid.uuid4().hex[:6]

                def unique(i: int, prefix: str, run_id: str = run_id) -> CommentV1:
                    # The run id in the text: nothing comes from an earlier round's cache.
                    return comment(i, long_comment(texts, i, args.scale_chars, prefix + run_id), prefix + run_id)

                # A new replica's first embeddings are slower (the session warms up).
                await drive(url, [unique(i, "w") for i in range(6 * replicas)], 0, timeout=300, watch_lag=False)
                pids = processes(stack)
                cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
                run = await drive(
                    url, [unique(i, "m") for i in range(args.scale_comments)], 0, timeout=900, watch_lag=False
                )
                per = {k: 1000 * (cpu_seconds(p) - cpu0[k]) / max(1, len(run.done)) for k, p in pids.items()}
                print(
                    f"# round {r + 1}, {replicas} replica(s): {run.throughput:.2f}/s; CPU ms per comment "
                    + ", ".join(f"{k} {v:.0f}" for k, v in per.items()),
                    file=sys.stderr,
                )
                bottleneck = sum(v for k, v in per.items() if k.startswith(GATE))
                results.append(Scaled(replicas, run.throughput, bottleneck, sum(per.values()) - bottleneck, r))
    finally:
        stack.stop()
        env_for({"KOTAE_EMBEDDING_MODEL": "use-multilingual-v3"})
    return results


async def set_replicas(stack: Stack, url: str, stage: str, replicas: int) -> None:
    """Start or stop (SIGTERM, it drains) processes of ``stage`` until ``replicas`` run."""
    procs = stack.processes.setdefault(stage, [])
    while len(procs) > replicas:
        proc = procs.pop()
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 60)
    while len(procs) < replicas:
        stack.spawn(stage)
    await wait_for_replicas(url, stage, replicas)


def scaling_table(rows: list[Scaled]) -> str:
    """Median over rounds of each replica count's throughput and of its ratio to the same round's one replica."""
    cores = os.cpu_count() or 1
    one = {r.round: r.throughput for r in rows if r.replicas == 1}
    out = []
    for n in sorted({r.replicas for r in rows}):
        mine = [r for r in rows if r.replicas == n]
        ratios = [r.throughput / one[r.round] for r in mine]
        out.append(
            [
                str(n),
                f"{statistics.median(r.throughput for r in mine):.1f}",
                f"{statistics.median(ratios):.2f}",
                " ".join(f"{x:.2f}" for x in ratios),
                f"{statistics.median(r.bound(cores) for r in mine):.2f}",
                f"{statistics.median(r.bottleneck_ms for r in mine):.0f}",
                f"{statistics.median(r.rest_ms for r in mine):.0f}",
            ]
        )
    return table(
        [
            "retriever replicas",
            "comments/s",
            "× one replica",
            "× one replica, each round",
            f"bound on {cores} cores",
            "retriever CPU ms/comment",
            "rest CPU ms/comment",
        ],
        out,
    )


async def wait_for_replicas(url: str, stage: str, replicas: int, timeout: float = 180.0) -> None:
    """Until ``replicas`` processes of ``stage`` are pulling from its consumer."""
    nc = await nats.connect(url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            info = await nc.jetstream().consumer_info(*consumer_of(stage))
            if (info.num_waiting or 0) >= replicas:
                return
            await asyncio.sleep(0.2)
    finally:
        await nc.close()


async def soak(url: str, stack: Stack, texts: list[str], args: argparse.Namespace) -> list[list[str]]:
    """RSS of every process sampled every 30 s while comments arrive at ``--rate``.

    Growth compares the end with the first minute (warm-up: pools, caches and the
    peak of in-flight work reach their size) and, separately, the second half of
    the run with its middle: a leak keeps growing there, a plateau does not.
    """
    pids = processes(stack)
    total = int(args.soak_min * 60 * args.rate)
    run_id = uuid.uuid4().hex[:6]
    comments = [comment(i, texts[i % len(texts)], f"soak{run_id}") for i in range(total)]
    samples: list[tuple[float, dict[str, float]]] = []
    started = time.monotonic()

    async def sample() -> None:
        while True:
            samples.append((time.monotonic() - started, {k: rss_mb(p) for k, p in pids.items()}))
            await asyncio.sleep(30)

    sampler = asyncio.create_task(sample())
    await drive(url, comments, args.rate, timeout=args.soak_min * 60 + 300, watch_lag=False)
    sampler.cancel()
    samples.append((time.monotonic() - started, {k: rss_mb(p) for k, p in pids.items()}))
    after_warmup = next((row for t, row in samples if t >= 60), samples[-1][1])
    middle = next((row for t, row in samples if t >= samples[-1][0] / 2), samples[-1][1])
    end = samples[-1][1]
    return [
        [
            k,
            f"{after_warmup[k]:.0f}",
            f"{middle[k]:.0f}",
            f"{end[k]:.0f}",
            f"{100 * (end[k] / after_warmup[k] - 1):+.1f}%",
            f"{100 * (end[k] / middle[k] - 1):+.1f}%",
        ]
        for k in pids
    ]


def write_section(text: str) -> None:
    """Put this run's tables into docs/benchmarks.md, between the markers (the words around them stay)."""
    doc = DOCS.read_text(encoding="utf-8")
    generated = f"{BEGIN}\n\n{text}\n\n{END}"
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN)] + generated + doc[doc.index(END) + len(END) :]
    elif SECTION in doc:
        start = doc.index(SECTION)
        nxt = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + f"{SECTION}\n\n{generated}\n" + (doc[nxt:] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + f"\n\n{SECTION}\n\n{generated}\n"
    DOCS.write_text(doc, encoding="utf-8")


def main() -> None:
    if sys.argv[1:2] == ["--floor-hop"]:  # one hop of the floor, started by floor()
        url, name, h, hops, wanted, out = sys.argv[2:8]
        run_loop(floor_hop_process(url, name, int(h), int(hops), int(wanted), out), load_settings())
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comments", type=int, default=1500)
    parser.add_argument("--rate", type=float, default=60.0, help="arrival rate, comments per second")
    parser.add_argument("--latency-ms", type=int, default=500, help="latency of one fake model call")
    parser.add_argument(
        "--fake-nice",
        type=int,
        default=10,
        help="nice of the fake model server: it stands in for a hosted API, which takes none of these cores",
    )
    parser.add_argument("--inflight", type=int, default=128, help="KOTAE_INFLIGHT of every stage")
    parser.add_argument(
        "--hop-rounds",
        type=int,
        default=3,
        help="extra rounds of a pipeline run followed by the floor, for the per-hop ratio in time-matched pairs",
    )
    parser.add_argument("--hop-comments", type=int, default=600, help="comments of each such round")
    parser.add_argument(
        "--quiet-rate", type=float, default=2.0, help="arrival rate of the run with few comments in flight"
    )
    parser.add_argument("--quiet-comments", type=int, default=120)
    parser.add_argument("--sequential", type=int, default=8, help="comments through the one-at-a-time pipeline")
    parser.add_argument("--scale-comments", type=int, default=150, help="comments of each scaling measurement")
    parser.add_argument("--scale-rounds", type=int, default=4, help="rounds of 1, 2, 3 replicas (then 3, 2, 1, ...)")
    parser.add_argument("--scale-chars", type=int, default=120, help="length of each comment in the scaling run")
    parser.add_argument(
        "--scale-embedding",
        default="e5-small-q4",
        help="embedding model of the CPU-bound retriever (pip install kotae[e5])",
    )
    parser.add_argument("--scaling-only", action="store_true", help="run only the scaling part")
    parser.add_argument("--soak-min", type=float, default=0.0)
    parser.add_argument("--soak-only", action="store_true", help="run only the soak (with --soak-min, --rate)")
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    args = parser.parse_args()
    # The floor and the one-at-a-time pipeline run on the event loop the stages run on.
    text = run_loop(main_async(args), load_settings())
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
