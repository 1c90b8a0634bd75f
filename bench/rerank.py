"""The reranker's offline methods against retrieval order: top-1 accuracy, side by side.

    python bench/rerank.py ../shared/data/jsquad-v1.3-valid.json [--limit N]

The top-1 document decides the slide shown on stream. For each question the real
retriever (embedded default, no model calls) returns its candidates (top_k 8);
then each offline method orders them:

* retrieval order (``keep_top_n``);
* ``embedding_rescore`` for a grid of blend weights ``alpha`` (0 = retrieval order,
  1 = the embedding similarity of each candidate's best sentence alone).

JSQuAD: the 1,145 paragraphs of v1.3 validation as a knowledge base, every question
whose answer is its own paragraph; alpha is chosen on even-numbered questions and
reported on the odd ones (held out) and on all. The bundled sample: its labelled
answerable questions and their expected documents. Prints Markdown tables and the
machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from retrieval import load_jsquad as jsquad  # noqa: E402

import kotae.samples  # noqa: E402
from kotae.contracts import Evidence  # noqa: E402
from kotae.knowledge.loading import load_knowledge_base  # noqa: E402
from kotae.knowledge.records import KBRecord, load_records  # noqa: E402
from kotae.services.reranker.logic import rescore_scores  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

ALPHAS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0]
DAY = date(2026, 11, 30)


def sample() -> tuple[list[KBRecord], list[tuple[str, str]]]:
    root = Path(kotae.samples.__file__).parent
    questions = []
    for line in (root / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q["kind"] == "answerable" and q.get("expected_doc_ids"):
            questions.append(("|".join(q["expected_doc_ids"]), q["text"]))
    return load_records(root / "kb"), questions


def candidates(records: list[KBRecord], questions: list[tuple[str, str]], kb: str, work: Path) -> list[list[Evidence]]:
    settings = load_settings(data_dir=work, kb=kb)
    load_knowledge_base(records, kb, settings)
    retriever = Retriever(settings)
    out = []
    started = time.perf_counter()
    for i, (_, text) in enumerate(questions):
        out.append(list(retriever.retrieve(text, kb=kb, day=DAY).docs))
        if i % 1000 == 999:
            print(f"# {kb}: {i + 1} questions retrieved, {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return out


def top1(gold: str, docs: list[Evidence], scores: list[float] | None) -> bool:
    if not docs:
        return False
    best = docs[0] if scores is None else docs[max(range(len(docs)), key=lambda i: (scores[i], -i))]
    return best.doc_id in gold.split("|")


def table(
    name: str, questions: list[tuple[str, str]], cands: list[list[Evidence]], split: bool, model: str
) -> list[str]:
    from kotae.knowledge.embeddings import embedder_for

    embedder = embedder_for(model)
    hits: dict[float, list[bool]] = {a: [] for a in ALPHAS}
    retrieval: list[bool] = []
    started = time.perf_counter()
    for (gold, text), docs in zip(questions, cands, strict=True):
        retrieval.append(top1(gold, docs, None))
        for alpha in ALPHAS:
            hits[alpha].append(top1(gold, docs, rescore_scores(text, docs, embedder, alpha) if docs else None))
    per_q_ms = (time.perf_counter() - started) * 1000 / max(1, len(questions)) / len(ALPHAS)

    def rate(values: list[bool], part: str) -> float:
        chosen = values if part == "all" else values[0::2] if part == "even" else values[1::2]
        return sum(chosen) / max(1, len(chosen))

    parts = ["even", "odd", "all"] if split else ["all"]
    heads = {"even": "chosen on (even)", "odd": "held out (odd)", "all": "all"}
    lines = [f"{name}: {len(questions)} questions; top-1 accuracy of the document shown first.", ""]
    lines.append("| method | " + " | ".join(heads[p] for p in parts) + " |")
    lines.append("|---|" + "---:|" * len(parts))
    lines.append("| retrieval order (`keep_top_n`) | " + " | ".join(f"{rate(retrieval, p):.4f}" for p in parts) + " |")
    for alpha in ALPHAS:
        lines.append(
            f"| `embedding_rescore` alpha {alpha:g} | "
            + " | ".join(f"{rate(hits[alpha], p):.4f}" for p in parts)
            + " |"
        )
    if split:
        best = max(ALPHAS, key=lambda a: (rate(hits[a], "even"), -a))
        lines += [
            "",
            f"Best alpha on the even questions: {best:g} → held out {rate(hits[best], 'odd'):.4f} "
            f"(retrieval order {rate(retrieval, 'odd'):.4f}).",
        ]
    lines += ["", f"Rescoring cost: {per_q_ms:.1f} ms per question (embedding every candidate sentence with {model})."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jsquad", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="use only the first N JSQuAD questions")
    parser.add_argument("--embedding", default="use-multilingual-v3", help="embedding model of the rescoring")
    parser.add_argument("--skip-sample", action="store_true")
    args = parser.parse_args()
    print(describe())
    print()
    with tempfile.TemporaryDirectory(prefix="kotae-rerank-") as tmp:
        if not args.skip_sample:
            records, questions = sample()
            cands = candidates(records, questions, "sample", Path(tmp) / "s")
            print("\n".join(table("Bundled sample", questions, cands, False, args.embedding)))
            print()
        records, questions = jsquad(args.jsquad)
        if args.limit:
            questions = questions[: args.limit]
        cands = candidates(records, questions, "jsquad", Path(tmp) / "j")
        print("\n".join(table("JSQuAD v1.3 valid", questions, cands, True, args.embedding)))


if __name__ == "__main__":
    main()
