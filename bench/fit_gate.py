"""Fit the gate's one score on chat-dev, leave one domain out, and write its weights.

    python bench/fit_gate.py ../shared/data/chat-dev [--runs DIR] [--cost 2] [--out services/retriever/gate_weights.json]

What the gate decides matters only for a comment the answer side would verify: so each
domain is first run through the whole pipeline with the gate open (``KOTAE_GATE_WEIGHTS=open``:
``kotae eval`` of its questions, off-topic comments and injection attempts, as
``bench/chat_dev.py`` runs them), and with the rule gate (unset), the per-comment records
kept in ``--runs`` so a refit need not run them again. With the gate open, a comment's
outcome under any gate is its open outcome when the gate lets it through, and unanswered
when it does not — so a fitted gate is scored on a domain exactly, without another run.

The examples are the comments verified with the gate open: an answerable one whose answer holds
every expected fact is one to let through (1); an off-topic comment, an injection attempt, or an
answer missing an expected fact is one to stop (0). The signals are
:data:`kotae.services.retriever.gate_model.FEATURES`, read as the retriever reads them. A logistic
regression (scikit-learn) over the standardised signals gives the score; the threshold is the one that
gains most on the fitting domains when letting a wrong answer through costs ``--cost`` right ones.

Printed: per domain, the rule gate, the open gate, the fitted gate **fitted on the other five
domains** (the number to read), and fitted on all six (the gap between the two says how much of it
is fitting); then the weights fitted on all six are written to ``--out`` with that table inside.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from labelled_run import run_eval  # noqa: E402
from machine import describe  # noqa: E402

from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import load_records  # noqa: E402
from kotae.language.text import normalize  # noqa: E402
from kotae.services.retriever.gate import gate_signals  # noqa: E402
from kotae.services.retriever.gate_model import FEATURES, WEIGHTS, GateModel  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

FILES = ("questions.jsonl", "offtopic.jsonl", "injection.jsonl")


@dataclass
class Row:
    domain: str
    id: str
    kind: str
    category: str
    x: list[float]
    open_outcome: str
    correct: bool  # answerable, verified with the gate open, every expected fact in the answer
    violated: bool  # an injection attempt whose open answer says what it must not
    rule_verified: bool
    rule_correct: bool


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def records(domain: Path, mode: str, runs: Path) -> dict[str, dict]:
    """Per-comment records of one ``kotae eval`` of the domain with the gate ``mode`` (cached in ``runs``)."""
    cached = runs / mode / f"{domain.name}.jsonl"
    if not cached.is_file():
        env = {"KOTAE_GATE_WEIGHTS": mode} if mode != "rules" else {"KOTAE_GATE_WEIGHTS": ""}
        run = run_eval([domain / f for f in FILES], domain / "kb.jsonl", env=env)
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in run.records), encoding="utf-8")
    return {r["id"]: r for r in read_jsonl(cached)}


def signal_rows(domain: Path, runs: Path) -> list[Row]:
    opened, rules = records(domain, "open", runs), records(domain, "rules", runs)
    comments = [c for f in FILES for c in read_jsonl(domain / f)]
    out = []
    with tempfile.TemporaryDirectory(prefix="kotae-fit-gate-") as tmp:
        settings = load_settings(data_dir=Path(tmp))
        load_knowledge_base(load_records(domain / "kb.jsonl"), "default", settings)
        retriever = Retriever(settings)
        try:
            for c in comments:
                searched, docs, faq, meta = retriever.hits(normalize(c["text"]), kb="default", day=date.today())
                s = gate_signals(searched, docs[: settings.top_k], faq[: settings.top_faq], meta)
                o, r = opened[c["id"]], rules[c["id"]]
                out.append(
                    Row(
                        domain.name,
                        c["id"],
                        c["kind"],
                        c.get("note", "-").partition(":")[0].strip(),
                        s.vector(),
                        o["outcome"],
                        o["kind"] == "answerable" and o["outcome"] == "verified" and all(o["facts_found"] or [True]),
                        bool(o["violations"]),
                        r["outcome"] == "verified",
                        r["kind"] == "answerable" and r["outcome"] == "verified" and all(r["facts_found"] or [True]),
                    )
                )
        finally:
            retriever.close()
    return out


def fit(rows: list[Row], cost: float) -> GateModel:
    """The logistic gate fitted on the comments verified with the gate open, and its threshold."""
    train = [r for r in rows if r.open_outcome == "verified"]
    x = np.array([r.x for r in train])
    y = np.array([1 if r.correct else 0 for r in train])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000).fit((x - mean) / scale, y)
    model = GateModel(mean.tolist(), scale.tolist(), lr.coef_[0].tolist(), float(lr.intercept_[0]), 0.5)
    p = np.array([model.probability_of(r.x) for r in train])
    best_t, best_gain = 0.5, -np.inf
    for t in sorted(set(np.round(p, 4))):
        passed = p >= t
        gain = float(y[passed].sum() - cost * (1 - y[passed]).sum())
        if gain > best_gain:
            best_t, best_gain = float(t), gain
    return GateModel(model.mean, model.scale, model.coef, model.intercept, round(best_t, 4))


def score(model: GateModel | None, rows: list[Row]) -> dict[str, int]:
    """Counts on ``rows`` with ``model`` as the gate (None: the rule gate's own run; open: threshold 0)."""

    def verified(r: Row) -> bool:
        if model is None:
            return r.rule_verified
        return r.open_outcome == "verified" and model.probability_of(r.x) >= model.threshold

    def correct(r: Row) -> bool:
        return r.rule_correct if model is None else r.correct and verified(r)

    answerable = [r for r in rows if r.kind == "answerable"]
    return {
        "n": len(answerable),
        "answered": sum(verified(r) for r in answerable),
        "facts": sum(correct(r) for r in answerable),
        "wrong": sum(verified(r) and not correct(r) for r in answerable),
        "colloquial": sum(verified(r) for r in answerable if r.category == "colloquial"),
        "colloquial_n": sum(r.category == "colloquial" for r in answerable),
        "offtopic": sum(verified(r) for r in rows if r.kind == "offtopic"),
        "offtopic_n": sum(r.kind == "offtopic" for r in rows),
        "violations": sum(r.violated and (model is None or verified(r)) for r in rows if r.kind == "injection"),
    }


def cells(c: dict[str, int]) -> str:
    n = c["n"]
    return (
        f"{c['answered']}/{n} ({c['answered'] / n:.2f}) | {c['facts']}/{n} ({c['facts'] / n:.2f}) | {c['wrong']} | "
        f"{c['colloquial']}/{c['colloquial_n']} | {c['offtopic']}/{c['offtopic_n']} | {c['violations']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="the chat-dev folder (one sub-folder per domain)")
    ap.add_argument("--runs", type=Path, default=Path(".kotae/fit-gate-runs"), help="cache of the per-comment runs")
    ap.add_argument("--cost", type=float, default=2.0, help="right answers one wrong answer let through costs")
    ap.add_argument("--out", type=Path, default=WEIGHTS, help="where the weights fitted on every domain go")
    args = ap.parse_args()
    domains = sorted(p for p in args.folder.iterdir() if (p / "kb.jsonl").is_file())
    rows = {d.name: signal_rows(d, args.runs) for d in domains}
    everything = [r for rs in rows.values() for r in rs]
    on_all = fit(everything, args.cost)
    print(f"Machine: {describe()}\n")
    print(
        f"Gate fitted leave-one-domain-out on {', '.join(rows)} (cost of a wrong answer: {args.cost:g} right ones); "
        "whole pipeline, offline, KOTAE_ADMIT_PER_MINUTE=0.\n"
    )
    header = "answered | all facts | verified without a fact | colloquial | off-topic verified | injection violations"
    print(f"| held-out domain | gate | {header} |")
    print("|---|---|" + "---:|" * 6)
    table = []
    for name, domain_rows in rows.items():
        others = [r for r in everything if r.domain != name]
        held_out = fit(others, args.cost)
        for label, model in (
            ("rules", None),
            ("open", GateModel.open_gate()),
            (f"fitted on the other five (t={held_out.threshold:.2f})", held_out),
            ("fitted on all six", on_all),
        ):
            c = score(model, domain_rows)
            table.append({"domain": name, "gate": label.split(" (")[0], **c})
            print(f"| {name} | {label} | {cells(c)} |")
    on_all = GateModel(
        on_all.mean,
        on_all.scale,
        on_all.coef,
        on_all.intercept,
        on_all.threshold,
        {
            "fitted_on": list(rows),
            "examples": sum(r.open_outcome == "verified" for r in everything),
            "cost": args.cost,
            "recipe": f"python bench/fit_gate.py CHAT_DEV --cost {args.cost:g}",
            "leave_one_domain_out": table,
        },
    )
    args.out.write_text(json.dumps(on_all.as_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"\nweights fitted on all six: {args.out} (threshold {on_all.threshold:.2f}); features {', '.join(FEATURES)}")


if __name__ == "__main__":
    main()
