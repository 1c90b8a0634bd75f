"""Where the offline answer side loses right answers, and whether a fitted decision over its signals does better.

    python bench/answer_signals.py ../shared/data/chat-dev [--runs DIR]

Every comment of each chat-dev domain (questions, off-topic comments, injection attempts; those
triage drops left out, as ``bench/fit_gate.py``'s open-gate runs in ``--runs`` record them) is
retrieved as the retriever does it, and every sentence of its first three documents and its FAQ
entries (in the comment's language) is weighed as the extractive generator weighs it
(:func:`kotae.services.generator.sentence_choice.weigh`): relevance (its veto and its coverage, how
each asked term was found), the slot, the shared words, the block's rank, the sentence's place in
its block, and the embedding cosine to the comment. A sentence is *right* when it holds every
expected fact of an answerable question.

Printed, per domain and in all:

1. **the funnel**: answerable questions with a right sentence among the candidates; with a right
   sentence that relevance lets through; whose best relevant sentence (the generator's score) is right;
2. **which sentence**, leave one domain out: among the questions with a right relevant sentence, how
   often the top one is right, by the generator's hand-set score, by the cosine alone, and by a logistic
   regression over the signals fitted on the other five domains;
3. **one fitted decision for relevance and choice together**, leave one domain out: the best sentence by a
   model fitted on the other five (logistic, or gradient-boosted trees), answered when its score clears a
   threshold, swept; the frontier of right answers against off-topic comments answered, beside the
   pipeline's own numbers (``bench/chat_dev.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_gate import FILES, read_jsonl, records  # noqa: E402
from machine import describe  # noqa: E402

from kotae.citations import numbered_blocks  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import detect_lang, load_records  # noqa: E402
from kotae.language.question_focus import holds_kind, question_focus  # noqa: E402
from kotae.language.text import normalize, split_sentences  # noqa: E402
from kotae.services.evaluator.labelled import facts_in  # noqa: E402
from kotae.services.generator.logic import _quotable  # noqa: E402
from kotae.services.generator.sentence_choice import weigh  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

SIGNALS = (
    "relevant", "coverage", "slot", "overlap", "rank", "order_in", "cos", "faq", "missing", "unfilled",
    "in_answer", "in_title", "in_evidence", "nowhere", "terms", "asks", "yes_no", "kind_held", "top_score",
)  # fmt: skip
CHOICE = ("slot", "coverage", "overlap", "rank", "cos")


def candidates(domain: Path, runs: Path) -> list[dict[str, Any]]:
    """One row per (comment, evidence sentence) of the domain, with its signals and whether it is right."""
    opened = records(domain, "open", runs)
    comments = [c for f in FILES for c in read_jsonl(domain / f) if opened[c["id"]]["outcome"] != "dropped"]
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kotae-answer-signals-") as tmp:
        settings = load_settings(data_dir=Path(tmp))
        load_knowledge_base(load_records(domain / "kb.jsonl"), "default", settings)
        retriever = Retriever(settings)
        try:
            for c in comments:
                text = normalize(c["text"])
                lang = detect_lang(text)
                found = retriever.retrieve(text, kb="default", day=date.today())
                blocks = numbered_blocks(found.docs[: settings.top_n], found.faq)
                pairs = [(b, s) for b in blocks if (b.lang or lang) == lang for s in split_sentences(_quotable(b))]
                if pairs:
                    out += _rows(domain.name, c, text, found.top_score, pairs, retriever)
        finally:
            retriever.close()
    return out


def _rows(domain: str, c: dict, text: str, top_score: float, pairs: list, retriever: Retriever) -> list[dict]:
    focus = question_focus(text)
    vectors = retriever.embedder.embed([text] + [s for _, s in pairs], "query")
    first: dict[int, int] = {}
    facts = tuple(c.get("expected_facts") or ())
    rows = []
    for cand, cos in zip(weigh(text, pairs), vectors[1:] @ vectors[0], strict=True):
        first.setdefault(cand.block.n, cand.order)
        m = cand.relevance.matches
        n = max(1, len(m))
        rows.append(
            {
                "domain": domain,
                "id": c["id"],
                "kind": c["kind"],
                "relevant": float(cand.relevance.relevant),
                "coverage": cand.relevance.coverage,
                "slot": cand.slot,
                "overlap": cand.overlap,
                "rank": cand.block.n,
                "order": cand.order,
                "order_in": min(5, cand.order - first[cand.block.n]),
                "cos": float(cos),
                "faq": float(cand.block.kind == "faq"),
                "missing": len(cand.relevance.missing),
                "unfilled": len(cand.relevance.unfilled),
                "in_answer": sum(x.credit >= 1.0 for x in m) / n,
                "in_title": sum(x.where == "title" for x in m) / n,
                "in_evidence": sum(x.where == "evidence" for x in m) / n,
                "nowhere": sum(x.where == "nowhere" for x in m) / n,
                "terms": len(m),
                "asks": float(focus.explicit and bool(focus.kinds)),
                "yes_no": float(focus.yes_no),
                "kind_held": float(any(holds_kind(k, cand.sentence) for k in focus.kinds)),
                "top_score": top_score,
                "right": bool(facts) and all(facts_in(cand.sentence, facts)),
                "hand": cand.score,
            }
        )
    return rows


def _scorer(train: list[dict], names: tuple[str, ...], trees: bool = False):  # type: ignore[no-untyped-def]
    x = np.array([[float(r[f]) for f in names] for r in train])
    y = np.array([r["right"] for r in train])
    if trees:
        model = HistGradientBoostingClassifier(max_depth=3, max_iter=150, learning_rate=0.05).fit(x, y)
        return lambda rows: model.decision_function(np.array([[float(r[f]) for f in names] for r in rows]))
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(class_weight="balanced", max_iter=5000).fit((x - mean) / scale, y)
    return lambda rows: lr.decision_function((np.array([[float(r[f]) for f in names] for r in rows]) - mean) / scale)


def funnel(by_comment: dict[tuple[str, str], list[dict]], domain: str | None) -> tuple[int, int, int, int]:
    n = in_top = relevant = chosen = 0
    for (d, _), rows in by_comment.items():
        if (domain and d != domain) or rows[0]["kind"] != "answerable":
            continue
        n += 1
        if any(r["right"] for r in rows):
            in_top += 1
            ok = [r for r in rows if r["relevant"]]
            if any(r["right"] for r in ok):
                relevant += 1
                chosen += max(ok, key=lambda r: (r["hand"], -r["order"]))["right"]
    return n, in_top, relevant, chosen


def choice_table(by_comment: dict, domains: list[str]) -> list[str]:
    lines = [
        "| held-out domain | questions | generator's score | cosine alone | fitted on the other five |",
        "|---|---:|---:|---:|---:|",
    ]
    totals = np.zeros(4, dtype=int)
    for d in domains:
        train = [r for (dd, _), rows in by_comment.items() if dd != d for r in rows if r["relevant"]]
        fitted = _scorer(train, CHOICE)
        counts = np.zeros(4, dtype=int)
        for (dd, _), rows in by_comment.items():
            ok = [r for r in rows if r["relevant"]]
            if dd != d or not any(r["right"] for r in ok):
                continue
            counts[0] += 1
            counts[1] += max(ok, key=lambda r: (r["hand"], -r["order"]))["right"]
            counts[2] += max(ok, key=lambda r: r["cos"])["right"]
            counts[3] += ok[int(np.argmax(fitted(ok)))]["right"]
        totals += counts
        lines.append(f"| {d} | {counts[0]} | {counts[1]} | {counts[2]} | {counts[3]} |")
    lines.append(
        f"| all | {totals[0]} | {totals[1]} ({totals[1] / totals[0]:.3f}) | {totals[2]} ({totals[2] / totals[0]:.3f}) | {totals[3]} ({totals[3] / totals[0]:.3f}) |"
    )
    return lines


def frontier(by_comment: dict, domains: list[str], trees: bool) -> list[tuple[int, int, int]]:
    """(off-topic answered, right answers, answered) at each threshold of the held-out decisions."""
    best: dict[tuple[str, str], tuple[float, dict]] = {}
    for d in domains:
        train = [r for (dd, _), rows in by_comment.items() if dd != d for r in rows]
        score = _scorer(train, SIGNALS, trees)
        for key, rows in by_comment.items():
            if key[0] == d:
                s = score(rows)
                i = int(np.argmax(s))
                best[key] = (float(s[i]), rows[i])
    points = []
    for t in np.quantile([s for s, _ in best.values()], np.linspace(0.3, 0.99, 24)):
        passed = [(by_comment[k][0]["kind"], r) for k, (s, r) in best.items() if s >= t]
        points.append(
            (
                sum(kind == "offtopic" for kind, _ in passed),
                sum(kind == "answerable" and r["right"] for kind, r in passed),
                sum(kind == "answerable" for kind, _ in passed),
            )
        )
    return points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="the chat-dev folder (one sub-folder per domain)")
    ap.add_argument("--runs", type=Path, default=Path(".kotae/fit-gate-runs"), help="bench/fit_gate.py's run cache")
    args = ap.parse_args()
    domains = sorted(p.name for p in args.folder.iterdir() if (p / "kb.jsonl").is_file())
    by_comment: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for d in domains:
        for row in candidates(args.folder / d, args.runs):
            by_comment[(row["domain"], row["id"])].append(row)
    print(f"Machine: {describe()}\n")
    print("1. Answerable questions: a right sentence among the candidates → one relevance lets through → chosen\n")
    print("| domain | questions | right sentence there | … relevant | … chosen |\n|---|---:|---:|---:|---:|")
    for d in [*domains, None]:
        n, top, rel, chosen = funnel(by_comment, d)
        print(f"| {d or 'all'} | {n} | {top} | {rel} | {chosen} |")
    print("\n2. Which sentence, among questions with a right relevant one (top one right):\n")
    print("\n".join(choice_table(by_comment, domains)))
    print(
        "\n3. Relevance and choice as one fitted decision, held out; (off-topic answered, right, answered) per threshold:\n"
    )
    for trees in (False, True):
        pts = [p for p in frontier(by_comment, domains, trees) if p[0] <= 25]
        print(f"- {'gradient-boosted trees' if trees else 'logistic'}: " + ", ".join(f"{o}/{r}/{a}" for o, r, a in pts))
    print(json.dumps({"comments": len(by_comment)}))


if __name__ == "__main__":
    main()
