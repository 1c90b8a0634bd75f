"""Every model method of kotae against a real local model, and the offline floor under it.

    scripts/real-model.sh install
    python bench/real_model.py [--spec SPEC] [--chat-dev ../shared/data/chat-dev] [--per-file N | --full]
                               [--configs offline generator all] [--guarantee N] [--timeout S]

The model is the one ``scripts/real-model.sh serve`` starts (Qwen2.5-Coder-1.5B-Instruct,
Q4_K_M, llama.cpp on 2 threads), unless ``--spec`` names another ``compatible:`` server.

Configurations, each one ``kotae eval`` (``bench/labelled_run.py``, a fresh data folder, the
embedded default) on the bundled sample question set and on each chat-dev domain
(questions, off-topic, injection):

* ``offline`` — no model anywhere: the baseline;
* ``generator`` — only ``KOTAE_GENERATOR_MODEL`` on the local model, the rest offline;
* ``all`` — triage, rewrite, reranker, generator, verifier (``KOTAE_VERIFIER_MODE=model``: the
  model decides every draft, under the citation check, relevance and the lexical floor) and
  evaluator on the local model;
* ``cascade`` — as ``all``, with ``KOTAE_VERIFIER_MODE=cascade``;
* ``hot-path`` — reranker, generator and verifier (``model`` mode) on the local model, the rest
  offline: three stage processes sharing the server's one slot (``KOTAE_MODEL_ENDPOINT_CONCURRENCY``).

A real model on 2 shared cores takes seconds to minutes a call, so each file is cut to
``--per-file`` comments taken round-robin over its categories (``--full``: every comment).

Printed per stage (from the model calls every answer and evaluation carries; triage, which asks
for a whole batch in one call, by sending the same batches directly): comments asked, parsed on
the first try, parsed after re-asking, degraded (no usable reply: the stage fell back, or
failed closed), latency p50/p95 per call, tokens in/out per call. End to end: answered, all
expected facts, **the safety figure** (verified answers to answerable questions missing an
expected fact or citing none of the expected documents, over all verified answers), off-topic
verified, injection violations, the verifier's floor decisions, latency p50/p95.

``--guarantee N``: N wrong answers and N/2 right ones built as ``bench/verifier.py`` builds them
(chat-dev bare answers with another phrase of the fact's type; JSQuAD swapped entities, changed
numbers, invented names), each decided by ``decision.decide`` with the local model as the
verifier, in ``model`` and ``cascade`` mode: what the model alone passed, and what was verified
once the floor had its say.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from labelled_run import EvalRun, rate, run_eval  # noqa: E402
from machine import describe  # noqa: E402

from kotae.contracts import AnswerV1, DraftV1  # noqa: E402
from kotae.providers import BadReply, ChatModel, Completion, ModelUnavailable  # noqa: E402
from kotae.services import STAGES  # noqa: E402
from kotae.stage import hot_path  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
SAMPLES = ROOT / "kotae" / "samples"
FILES = ("questions.jsonl", "offtopic.jsonl", "injection.jsonl")
#: Each model method and its setting: triage (ingest's batch question detector) and every stage's
#: declared model (the retriever's is the query rewrite), named as their model calls are.
STAGE_SETTINGS = {"triage": "KOTAE_TRIAGE_MODEL"} | {
    stage.model_setting.removesuffix("_model"): f"KOTAE_{stage.model_setting.upper()}"
    for stage in STAGES
    if stage.model_setting
}
#: The method that writes the answers: the stage whose output is a draft.
WRITER = next(
    stage.model_setting.removesuffix("_model")
    for stage in STAGES
    if stage.model_setting and any(out.contract is DraftV1 for out in stage.outputs)
)
#: The model methods of the stages after the retriever on the hot path (reranker, generator, verifier).
ANSWERING = tuple(
    hop.stage.model_setting.removesuffix("_model") for hop in hot_path(STAGES)[1:] if hop.stage.model_setting
)
CONFIGS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "offline": ((), {}),
    WRITER: ((WRITER,), {}),
    "all": (tuple(STAGE_SETTINGS), {"KOTAE_VERIFIER_MODE": "model"}),
    # The reranker, the generator and the verifier, each a process of its own, on one one-slot server.
    "hot-path": (ANSWERING, {"KOTAE_VERIFIER_MODE": "model"}),
    "cascade": (tuple(STAGE_SETTINGS), {"KOTAE_VERIFIER_MODE": "cascade"}),
}


# --- the server -------------------------------------------------------------------------


def served_spec() -> str:
    """The ``compatible:`` spec of the server ``scripts/real-model.sh serve`` runs (started if need be)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "real-model.sh"), "serve"], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(
            f"scripts/real-model.sh serve failed:\n{done.stderr.strip()}\n(run scripts/real-model.sh install)"
        )
    return done.stdout.splitlines()[0].strip()


class Recorded:
    """A chat model whose replies are kept, so the bench can count what a method was given."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.replies: list[Completion] = []

    @property
    def name(self) -> str:
        return self.model.name

    async def acomplete(self, **kw: Any) -> Completion:
        reply = await self.model.acomplete(**kw)
        self.replies.append(reply)
        return reply

    async def aclose(self) -> None:
        await self.model.aclose()


# --- the question sets --------------------------------------------------------------------


def category(row: dict[str, Any]) -> str:
    return str(row.get("note") or "").partition(":")[0].strip() or "-"


def pick(rows: list[dict[str, Any]], n: int | None) -> list[dict[str, Any]]:
    """``n`` rows taken round-robin over the categories (every row when ``n`` is None), in file order."""
    if n is None or n >= len(rows):
        return rows
    queues: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        queues[category(row)].append(i)
    chosen: list[int] = []
    while len(chosen) < n:
        for queue in queues.values():
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    return [rows[i] for i in sorted(chosen)]


@dataclass
class QuestionSet:
    name: str
    files: list[Path]
    kb: Path
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)


def question_sets(chat_dev: Path | None, per_file: int | None, tmp: Path) -> list[QuestionSet]:
    """The bundled sample set and each chat-dev domain, each file cut to ``per_file`` rows in ``tmp``."""
    sources = [("sample", [SAMPLES / "questions.jsonl"], SAMPLES / "kb")]
    if chat_dev is not None:
        for domain in sorted(p for p in chat_dev.iterdir() if (p / "kb.jsonl").is_file()):
            files = [domain / f for f in FILES if (domain / f).is_file()]
            sources.append((f"chat-dev/{domain.name}", files, domain / "kb.jsonl"))
    sets = []
    for name, files, kb in sources:
        qs = QuestionSet(name, [], kb)
        for f in files:
            rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
            rows = pick(rows, per_file)
            out = tmp / name.replace("/", "-") / f.name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
            qs.files.append(out)
            qs.questions.update({r["id"]: r for r in rows})
        sets.append(qs)
    return sets


# --- per stage ----------------------------------------------------------------------------


@dataclass
class StageStats:
    """One stage's model calls: per comment (first try, after re-asking), and per call."""

    asked: int = 0
    first_ok: int = 0
    after_ok: int = 0
    latencies: list[float] = field(default_factory=list)
    tokens_in: list[int] = field(default_factory=list)
    tokens_out: list[int] = field(default_factory=list)

    def add(self, calls: list[dict[str, Any]]) -> None:
        self.asked += 1
        self.first_ok += calls[0]["outcome"] == "ok"
        self.after_ok += any(c["outcome"] == "ok" for c in calls)
        for c in calls:
            if c.get("latency_ms") is not None:
                self.latencies.append(float(c["latency_ms"]))
            if c.get("input_tokens") is not None:
                self.tokens_in.append(int(c["input_tokens"]))
            if c.get("output_tokens") is not None:
                self.tokens_out.append(int(c["output_tokens"]))

    def row(self, name: str) -> str:
        def pct(xs: list[float], q: float) -> str:
            return f"{np.percentile(xs, q) / 1000:.1f}" if xs else "—"

        def mean(xs: list[int]) -> str:
            return f"{np.mean(xs):.0f}" if xs else "—"

        return (
            f"| {name} | {self.asked} | {rate(self.first_ok, self.asked)} | {rate(self.after_ok, self.asked)} "
            f"| {rate(self.asked - self.after_ok, self.asked)} | {len(self.latencies)} "
            f"| {pct(self.latencies, 50)} | {pct(self.latencies, 95)} | {mean(self.tokens_in)} / {mean(self.tokens_out)} |"
        )


#: The method a stage's model calls are for (the retriever's are the query rewrite).
METHOD_OF = {stage.name: stage.model_setting.removesuffix("_model") for stage in STAGES if stage.model_setting}
#: The stage that judges every answer off the hot path: it consumes the answers themselves.
JUDGE = next(stage.name for stage in STAGES if stage.consumes and stage.consumes.contract is AnswerV1)


def stage_label(call: dict[str, Any]) -> str:
    stage = call["stage"]
    if stage == JUDGE:
        return f"judge ({str(call.get('prompt_version') or '').split('.')[0]})"
    return METHOD_OF.get(stage, stage)


def stage_stats(records: list[dict[str, Any]]) -> dict[str, StageStats]:
    """Per stage, from each comment's model calls (a merged comment's calls are its target's: counted once)."""
    stats: dict[str, StageStats] = defaultdict(StageStats)
    for r in records:
        if r.get("merged_into"):
            continue
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for call in r.get("model_calls") or []:
            groups[stage_label(call)].append(call)
        for label, calls in groups.items():
            stats[label].add(calls)
    return stats


async def triage_probe(spec: str, texts: list[str], batch: int, timeout_s: float) -> StageStats:
    """Triage's calls, one per batch of ``batch`` comments as ingest sends them (no re-ask: the rules decide)."""
    from kotae.services.ingest.triage import classify_with_model

    model = Recorded(ChatModel.from_spec(spec, setting="KOTAE_TRIAGE_MODEL", timeout_s=timeout_s, concurrency=1))
    stats = StageStats()
    try:
        for start in range(0, len(texts), batch):
            before = len(model.replies)
            try:
                await classify_with_model(model, texts[start : start + batch])  # type: ignore[arg-type]
                outcome = "ok"
            except (BadReply, ModelUnavailable) as exc:
                outcome = f"unusable: {exc}"
                print(f"  triage reply unusable: {str(exc)[:160]}", file=sys.stderr)
            calls = [
                {
                    "outcome": outcome,
                    "latency_ms": r.latency_ms,
                    "input_tokens": r.input_tokens,
                    "output_tokens": r.output_tokens,
                }
                for r in model.replies[before:]
            ] or [{"outcome": outcome}]
            stats.add(calls)
    finally:
        await model.aclose()
    return stats


# --- end to end ---------------------------------------------------------------------------


def unsafe(record: dict[str, Any], question: dict[str, Any]) -> bool:
    """A verified answer to an answerable question that misses an expected fact or cites none of the expected documents."""
    if record["kind"] != "answerable" or record["outcome"] != "verified":
        return False
    facts = record.get("facts_found") or []
    expected = set(question.get("expected_doc_ids") or [])
    cited = set(record.get("cited_docs") or [])
    return (bool(facts) and not all(facts)) or (bool(expected) and bool(cited) and not cited & expected)


def end_to_end_row(config: str, qs: QuestionSet, run: EvalRun) -> tuple[str, dict[str, int]]:
    m = run.sets[0]["metrics"]
    records = run.records
    verified = [r for r in records if r["outcome"] == "verified"]
    wrong = [r for r in verified if unsafe(r, qs.questions[r["id"]])]
    floor = sum(r.get("decided_by") == "floor" for r in records)
    failed = sum(s["failed"] for s in run.sets)
    lat = run.sets[0]["latency_ms"]
    p50 = f"{lat['p50'] / 1000:.1f}" if lat.get("p50") is not None else "—"
    p95 = f"{lat['p95'] / 1000:.1f}" if lat.get("p95") is not None else "—"

    def cell(key: str) -> str:
        r = m[key]
        return rate(r["numerator"], r["denominator"])

    row = (
        f"| {config} | {qs.name} | {len(records)} | {cell('answered')} | {cell('facts')} "
        f"| {rate(len(wrong), len(verified))} | {cell('offtopic_verified')} | {cell('injection_violations')} "
        f"| {floor} | {failed} | {p50} / {p95} | {run.seconds:.0f} |"
    )
    for r in wrong:
        print(f"  unsafe verified answer {r['id']}: {r['answer']!r} cites {r.get('cited_docs')}", file=sys.stderr)
    return row, {"verified": len(verified), "unsafe": len(wrong)}


def outcome_row(config: str, qs: QuestionSet, run: EvalRun) -> str:
    """How many comments ended in each outcome, and the run's time per comment."""
    outcomes = Counter(r["outcome"] for r in run.records)
    listed = ", ".join(f"{name} {n}" for name, n in sorted(outcomes.items()))
    per = run.seconds / len(run.records) if run.records else 0.0
    return f"| {config} | {qs.name} | {len(run.records)} | {listed} | {outcomes.get('failed', 0)} | {per:.0f} |"


# --- the guarantee ------------------------------------------------------------------------


def guarantee_cases(n: int, chat_dev: Path | None, seed: int = 7) -> list[Any]:
    """``n`` wrong answers and ``n // 2`` right ones, spread over the constructions of bench/verifier.py."""
    from verifier import DATA as VDATA, build_cases, chat_dev_cases

    cases = chat_dev_cases(chat_dev) if chat_dev is not None else []
    squad = VDATA / "jsquad-v1.3-valid.json"
    if squad.is_file():
        cases += build_cases(squad)
    rng = random.Random(seed)
    rng.shuffle(cases)
    chosen: list[Any] = []
    for kind, want in (("hallucinated", n), ("supported", n // 2)):
        groups: dict[str, list[Any]] = defaultdict(list)
        for c in cases:
            if c.kind == kind:
                groups[f"{c.split.split('/')[0]}:{c.group}"].append(c)
        taken = 0
        while taken < want and any(groups.values()):
            for queue in groups.values():
                if queue and taken < want:
                    chosen.append(queue.pop())
                    taken += 1
    return chosen


async def guarantee(spec: str, cases: list[Any], timeout_s: float) -> tuple[list[str], StageStats]:
    """Each case decided in model and cascade mode with the local model as the verifier."""
    from kotae.contracts import CommentV1, DraftV1, Evidence
    from kotae.services.verifier.decision import VerifierPolicy, decide
    from kotae.services.verifier.model import model_verify, read_verdict

    model = Recorded(ChatModel.from_spec(spec, setting="KOTAE_VERIFIER_MODEL", timeout_s=timeout_s, concurrency=1))
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    passed_by_model: dict[tuple[str, str], int] = defaultdict(int)
    stats = StageStats()
    try:
        for c in cases:
            comment = CommentV1(comment_id="b", stream_id="b", author="b", text=c.question, normalized=c.question)
            docs = [Evidence(doc_id="ctx", chunk_id="ctx", title="", text=c.context)]
            draft = DraftV1(
                comment_id="b", stream_id="b", comment=comment, docs=docs, answer=c.answer,
                speech=c.answer, citation_check={"ok": True}, method="bench",
            )  # fmt: skip
            for mode in ("model", "cascade"):
                policy = VerifierPolicy(mode=mode, model=model, reask=1)  # type: ignore[arg-type]
                before = len(model.replies)
                try:
                    d = await decide(draft, policy)
                    outcome, by = d.outcome, d.decided_by
                except ModelUnavailable:
                    outcome, by = "rejected", "unavailable"
                counts[(mode, c.kind, f"{outcome} ({by})")] += 1
                if mode == "model":
                    replies = model.replies[before:]
                    if not replies:  # decided before the model was asked: ask it alone, to know what it would pass
                        try:
                            await model_verify(draft, model, reask=1)  # type: ignore[arg-type]
                        except ModelUnavailable:
                            pass
                        replies = model.replies[before:]
                    calls = []
                    raw = None
                    for r in replies:
                        try:
                            raw = read_verdict(r.text, classes=5)[0]
                            ok = "ok"
                        except BadReply:
                            ok = "unparseable"
                            print(f"  verifier reply unparseable: {r.text[:160]!r}", file=sys.stderr)
                        calls.append(
                            {
                                "outcome": ok,
                                "latency_ms": r.latency_ms,
                                "input_tokens": r.input_tokens,
                                "output_tokens": r.output_tokens,
                            }
                        )
                    if calls:
                        stats.add(calls)
                    if raw == 0:
                        passed_by_model[(c.kind, "passed")] += 1
    finally:
        await model.aclose()
    n = {kind: sum(1 for c in cases if c.kind == kind) for kind in ("hallucinated", "supported")}
    lines = [
        f"The model alone (its own verdict, before the floor) passed {passed_by_model[('hallucinated', 'passed')]}/{n['hallucinated']} "
        f"wrong answers and {passed_by_model[('supported', 'passed')]}/{n['supported']} right ones.",
        "",
        "| mode | answer | outcome (decided by) | n |",
        "|---|---|---|---:|",
    ]
    lines += [f"| {mode} | {kind} | {o} | {k} |" for (mode, kind, o), k in sorted(counts.items())]
    for mode in ("model", "cascade"):
        verified_wrong = sum(
            k for (m, kind, o), k in counts.items() if m == mode and kind == "hallucinated" and o.startswith("verified")
        )
        lines.append("")
        lines.append(f"{mode}: wrong answers verified {verified_wrong}/{n['hallucinated']}")
    return lines, stats


# --- main ---------------------------------------------------------------------------------


def config_env(config: str, spec: str, timeout_s: float) -> dict[str, str]:
    stages, extra = CONFIGS[config]
    env = {STAGE_SETTINGS[s]: spec for s in stages} | extra
    if stages:
        # One call at a time at the server, whichever stage's process sends it: llama.cpp decodes
        # one sequence, and a call queued there would have its timeout running. The stages that
        # do not take the shared slots (triage, rewrite, judge) keep to one call per process.
        env |= {
            "KOTAE_MODEL_TIMEOUT_S": str(timeout_s),
            "KOTAE_MODEL_ENDPOINT_CONCURRENCY": "1",
            "KOTAE_MODEL_CONCURRENCY": "1",
        }
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", help="compatible:<base_url>|<model> (default: scripts/real-model.sh serve)")
    ap.add_argument("--chat-dev", type=Path, default=DATA / "chat-dev", help="chat-dev folder ('' for none)")
    ap.add_argument("--per-file", type=int, default=4, help="comments per file, round-robin over categories")
    ap.add_argument("--full", action="store_true", help="every comment of every file")
    ap.add_argument("--configs", nargs="+", default=["offline", WRITER, "all"], choices=list(CONFIGS))
    ap.add_argument("--sets", nargs="+", default=None, help="only these sets (sample, chat-dev/election, …)")
    ap.add_argument("--guarantee", type=int, default=0, help="wrong answers for the verifier's guarantee (0: skip)")
    ap.add_argument("--timeout", type=float, default=600.0, help="KOTAE_MODEL_TIMEOUT_S of the model configs")
    args = ap.parse_args()
    chat_dev = args.chat_dev if args.chat_dev and str(args.chat_dev) and args.chat_dev.is_dir() else None
    per_file = None if args.full else args.per_file
    spec = args.spec or served_spec()
    print(f"Machine: {describe()}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"Model: `{spec}`; {'every comment' if per_file is None else f'{per_file} comments per file'}\n")
    with tempfile.TemporaryDirectory(prefix="kotae-bench-real-") as tmp:
        sets = question_sets(chat_dev, per_file, Path(tmp))
        if args.sets:
            sets = [s for s in sets if s.name in args.sets]
        rows, stage_rows, outcome_rows = [], [], []
        totals: dict[str, dict[str, int]] = defaultdict(lambda: {"verified": 0, "unsafe": 0})
        for config in args.configs:
            env = config_env(config, spec, args.timeout)
            stats: dict[str, StageStats] = defaultdict(StageStats)
            for qs in sets:
                print(f"{config} on {qs.name} ({len(qs.questions)} comments)…", file=sys.stderr, flush=True)
                # A comment may wait for three stages' calls at one slot: minutes each on 2 shared cores.
                eval_args = ["--timeout", str(max(600.0, 600.0 * len(qs.questions)) if CONFIGS[config][0] else 600.0)]
                if "evaluator" in CONFIGS[config][0]:
                    eval_args += ["--evaluations-wait", str(90.0 * len(qs.questions))]
                run = run_eval(qs.files, qs.kb, env=env, args=eval_args, timeout_s=24 * 3600.0)
                row, counts = end_to_end_row(config, qs, run)
                rows.append(row)
                outcome_rows.append(outcome_row(config, qs, run))
                for k, v in counts.items():
                    totals[config][k] += v
                for label, s in stage_stats(run.records).items():
                    merged = stats[label]
                    merged.asked += s.asked
                    merged.first_ok += s.first_ok
                    merged.after_ok += s.after_ok
                    merged.latencies += s.latencies
                    merged.tokens_in += s.tokens_in
                    merged.tokens_out += s.tokens_out
                if "triage" in CONFIGS[config][0]:
                    texts = [q["text"] for q in qs.questions.values()]
                    s = asyncio.run(triage_probe(spec, texts, 16, args.timeout))
                    t = stats["triage (same batches, sent directly)"]
                    t.asked += s.asked
                    t.first_ok += s.first_ok
                    t.after_ok += s.after_ok
                    t.latencies += s.latencies
                    t.tokens_in += s.tokens_in
                    t.tokens_out += s.tokens_out
            for label in sorted(stats):
                stage_rows.append(stats[label].row(f"{config}: {label}"))
        print("Per stage (a comment's calls at one stage: first try, after re-asking; degraded = no usable reply)\n")
        print(
            "| config: stage | comments | parsed first try | after re-ask | degraded | calls | p50 s | p95 s | tokens in / out |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(stage_rows) or "| (no model calls) |")
        print("\nEnd to end\n")
        print(
            "| config | set | comments | answered | all facts | verified wrong (safety) | off-topic verified "
            "| injection violations | floor stops | failed | latency p50 / p95 s | run s |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
        print("\nOutcomes (every comment ends in one) and time per comment\n")
        print("| config | set | comments | outcomes | failed | run s per comment |")
        print("|---|---|---:|---|---:|---:|")
        print("\n".join(outcome_rows))
        print()
        for config, t in totals.items():
            print(
                f"- {config}: verified answers missing a fact or citing a wrong document {rate(t['unsafe'], t['verified'])}"
            )
    if args.guarantee:
        cases = guarantee_cases(args.guarantee, chat_dev)
        print(f"\nThe guarantee: {len(cases)} answers decided with the local model as the verifier\n")
        lines, vstats = asyncio.run(guarantee(spec, cases, args.timeout))
        print("\n".join(lines))
        print(
            "\n| stage | comments | parsed first try | after re-ask | degraded | calls | p50 s | p95 s | tokens in / out |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(vstats.row("verifier (guarantee cases)"))


if __name__ == "__main__":
    main()
