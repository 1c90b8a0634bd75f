"""Half the articles missing: JSQuAD through the whole pipeline, with a knowledge base that answers only half.

    python bench/half_missing.py ../shared/data/jsquad-v1.3-valid.json [--n 300] [--seed 0] [--write DIR]

The construction (deterministic for a seed): the paragraphs of every even-numbered
article (0, 2, 4 … in file order) form the knowledge base, one document per paragraph,
titled by its article; ``--n`` questions drawn from the even-numbered articles are
*answerable* (their paragraph is in the knowledge base), ``--n`` drawn from the
odd-numbered articles are *unanswerable* (nothing in the knowledge base was written to
answer them). ``--write DIR`` also writes ``kb.jsonl``, ``answerable.jsonl`` and
``unanswerable.jsonl`` there, so the same run can be repeated by hand::

    KOTAE_ADMIT_PER_MINUTE=0 kotae eval DIR/answerable.jsonl DIR/unanswerable.jsonl --kb DIR/kb.jsonl

Both question files are ``kotae eval`` sets (unanswerable questions are ``offtopic``:
the right outcome is to say nothing); each answerable line also carries
``gold_answers``, the JSQuAD answer spans.

The run is ``kotae eval`` on a fresh data folder (``bench/labelled_run.py``): the embedded
default, every stage its own process, offline methods (unless the environment configures
models), ``KOTAE_ADMIT_PER_MINUTE=0``. Printed: for the answerable questions, verified,
verified with a gold answer span in the answer (NFKC, separators and 万/億 normalised, as
facts are), verified from the right paragraph, dropped by triage (as chatter, merged into
another question), asked back (and whether the ask-back named the question's article),
left unanswered, rejected; for the unanswerable ones, verified, asked back, unanswered,
dropped. Then the outcome reasons that ended answerable questions without an answer.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from labelled_run import rate, run_eval  # noqa: E402
from machine import describe  # noqa: E402

from kotae.citations import strip_markers  # noqa: E402
from kotae.services.evaluator.labelled import fact_found, normalize_fact  # noqa: E402


def build(jsquad: Path, n: int, seed: int) -> tuple[list[dict], list[dict], list[dict]]:
    """Knowledge base records, answerable questions, unanswerable questions (see the module docstring)."""
    articles = json.loads(jsquad.read_text(encoding="utf-8"))["data"]
    kb: list[dict[str, Any]] = []
    pools: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for a, article in enumerate(articles):
        covered = a % 2 == 0
        for p, para in enumerate(article["paragraphs"]):
            doc_id = f"a{a:03d}-p{p:02d}"
            context = para["context"].split(" [SEP] ", 1)[-1]
            if covered:
                kb.append({"id": doc_id, "kind": "doc", "title": article["title"], "text": context, "lang": "ja"})
            for qa in para["qas"]:
                golds = list(dict.fromkeys(x["text"] for x in qa.get("answers", []) if x["text"].strip()))
                pools[covered].append(
                    {"qid": qa["id"], "text": qa["question"], "doc": doc_id, "title": article["title"], "gold": golds}
                )
    rng = random.Random(seed)
    if n > min(len(pools[True]), len(pools[False])):
        raise SystemExit(f"--n {n}: only {len(pools[True])} / {len(pools[False])} questions in the two halves")
    answerable = [
        {
            "id": f"ans-{q['qid']}",
            "text": q["text"],
            "kind": "answerable",
            "expected_doc_ids": [q["doc"]],
            "note": f"answerable: from {q['title']}",
            "gold_answers": q["gold"],
            "article": q["title"],
        }
        for q in rng.sample(pools[True], n)
    ]
    unanswerable = [
        {"id": f"una-{q['qid']}", "text": q["text"], "kind": "offtopic", "note": f"unanswerable: from {q['title']}"}
        for q in rng.sample(pools[False], n)
    ]
    return kb, answerable, unanswerable


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def gold_in(answer: str | None, golds: list[str]) -> bool:
    said = normalize_fact(strip_markers(answer or ""))
    return any(fact_found(said, g) for g in golds)


def tally(answerable: list[dict], unanswerable: list[dict], records: dict[str, dict]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    n_a, n_u = len(answerable), len(unanswerable)

    def outcome(q: dict) -> str:
        return records.get(q["id"], {}).get("outcome", "missing")

    def reason(q: dict) -> str:
        return records.get(q["id"], {}).get("reason") or ""

    verified = [q for q in answerable if outcome(q) == "verified"]
    gold = [q for q in verified if gold_in(records[q["id"]]["answer"], q["gold_answers"])]
    right_doc = [q for q in verified if records[q["id"]].get("top1_hit")]
    dropped = [q for q in answerable if outcome(q) == "dropped"]
    chatter = [q for q in dropped if reason(q).startswith("not_a_question")]
    # A merged question is scored by the answer it shares (kotae eval's rule); counted here apart.
    merged = [q for q in answerable if records.get(q["id"], {}).get("merged_into")]
    asked = [q for q in answerable if outcome(q) == "clarify"]
    asked_right = [q for q in asked if q["article"] in records[q["id"]].get("candidates", [])]
    rows += [
        ("answerable: verified", rate(len(verified), n_a)),
        ("answerable: verified with a gold answer span", rate(len(gold), n_a)),
        ("answerable: verified, top-1 paragraph right", rate(len(right_doc), n_a)),
        ("answerable: dropped by triage (all reasons)", rate(len(dropped), n_a)),
        ("answerable: dropped as chatter (not_a_question)", rate(len(chatter), n_a)),
        ("answerable: merged into an earlier question (scored by its answer)", rate(len(merged), n_a)),
        ("answerable: asked back", rate(len(asked), n_a)),
        ("answerable: asked back, naming the question's article", rate(len(asked_right), len(asked))),
        ("answerable: unanswered", rate(sum(outcome(q) == "unanswered" for q in answerable), n_a)),
        ("answerable: rejected by the verifier", rate(sum(outcome(q) == "rejected" for q in answerable), n_a)),
        ("unanswerable: verified", rate(sum(outcome(q) == "verified" for q in unanswerable), n_u)),
        ("unanswerable: asked back", rate(sum(outcome(q) == "clarify" for q in unanswerable), n_u)),
        ("unanswerable: unanswered", rate(sum(outcome(q) == "unanswered" for q in unanswerable), n_u)),
        ("unanswerable: dropped by triage", rate(sum(outcome(q) == "dropped" for q in unanswerable), n_u)),
        (
            "unanswerable: merged into an earlier question",
            rate(sum(bool(records.get(q["id"], {}).get("merged_into")) for q in unanswerable), n_u),
        ),
        ("unanswerable: rejected by the verifier", rate(sum(outcome(q) == "rejected" for q in unanswerable), n_u)),
    ]
    return rows


def reasons(questions: list[dict], records: dict[str, dict], outcomes: tuple[str, ...]) -> Counter:
    """How the questions that ended in ``outcomes`` ended: the reason up to its first colon."""
    out: Counter = Counter()
    for q in questions:
        r = records.get(q["id"], {})
        if r.get("outcome") in outcomes:
            out[f"{r['outcome']}: {(r.get('reason') or '').split(':', 1)[0]}"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--n", type=int, default=300, help="questions from each half")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path, default=None, help="also keep the construction's files in this folder")
    args = ap.parse_args()
    kb, answerable, unanswerable = build(args.jsquad, args.n, args.seed)
    with tempfile.TemporaryDirectory(prefix="kotae-half-") as tmp:
        folder = args.write or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        write_jsonl(folder / "kb.jsonl", kb)
        write_jsonl(folder / "answerable.jsonl", answerable)
        write_jsonl(folder / "unanswerable.jsonl", unanswerable)
        run = run_eval([folder / "answerable.jsonl", folder / "unanswerable.jsonl"], folder / "kb.jsonl")
    records = run.by_id()
    print(f"Machine: {describe()}\n")
    print(
        f"JSQuAD v1.3 valid, half the articles missing (seed {args.seed}): knowledge base = {len(kb)} paragraphs of the "
        f"even-numbered articles; {len(answerable)} answerable and {len(unanswerable)} unanswerable questions; "
        f"`kotae eval` on the embedded default, KOTAE_ADMIT_PER_MINUTE=0; {run.seconds:.0f} s.\n"
    )
    print("| measure | count / of | rate |")
    print("|---|---:|---:|")
    for name, cell in tally(answerable, unanswerable, records):
        counts, _, share = cell.partition(" ")
        print(f"| {name} | {counts} | {share.strip('()')} |")
    print("\nAnswerable questions left without an answer, by reason:\n")
    for why, k in reasons(answerable, records, ("dropped", "clarify", "unanswered", "rejected")).most_common():
        print(f"- {why}: {k}")
    print("\nUnanswerable questions answered or asked back, by reason:\n")
    for why, k in reasons(unanswerable, records, ("verified", "clarify")).most_common():
        print(f"- {why}: {k}")


if __name__ == "__main__":
    main()
