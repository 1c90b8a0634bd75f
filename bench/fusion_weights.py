"""Choose the retrieval fusion weights on half of JSQuAD, report on the other half.

    python bench/fusion_weights.py ../shared/data/jsquad-v1.3-valid.json [--cache FILE]

Runs each question's three searches (words, chars, dense; 30 results each) once
through the real index, then fuses them offline with every weight combination
of a small grid. Weights are picked on the even-numbered questions and reported
on the odd-numbered ones (held out) and on all; recall counts documents.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from retrieval import DAY, load_jsquad  # noqa: E402

from kotae.knowledge.embeddings import embedder_for  # noqa: E402
from kotae.knowledge.index import HybridSearcher, Scored, Search, Weights, build_index, fuse, open_embedded  # noqa: E402
from kotae.knowledge.store import KnowledgeStore  # noqa: E402

GRID_WORDS = [0, 0.25, 0.5, 0.75, 1.0]
GRID_DENSE = [0, 0.1, 0.2, 0.3, 0.5, 0.8]


def collect(jsquad: Path) -> tuple[list[str], list[dict[str, list[Scored]]]]:
    records, questions = load_jsquad(jsquad)
    with tempfile.TemporaryDirectory() as tmp:
        store = KnowledgeStore(Path(tmp) / "kb", "jsquad")
        store.load(records)
        embedder = embedder_for("use-multilingual-v3")
        build_index(store, embedder)
        backend, _ = open_embedded(store)
        searcher = HybridSearcher(backend, backend.meta("jsquad"), embedder, weights=Weights(1, 1, 1))
        per_question = []
        for _, q in questions:
            vectors = searcher.query_vectors(q)
            searches = [Search(f, v, "jsquad", "doc", DAY, 30) for f, v in vectors.items()]
            per_question.append(dict(zip(vectors, backend.search(searches))))
        backend.close()
    return [g for g, _ in questions], per_question


def recall(gold: list[str], per: list[dict[str, list[Scored]]], weights: Weights, idx: range) -> tuple[float, float]:
    r1 = r5 = 0
    for i in idx:
        use = {f: r for f, r in per[i].items() if getattr(weights, f) > 0}
        ranked = list(dict.fromkeys(h.doc_id for h in fuse(use, weights)))
        r1 += ranked[:1] == [gold[i]]
        r5 += gold[i] in ranked[:5]
    return r1 / len(idx), r5 / len(idx)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--cache", type=Path, help="keep the per-question search results here between runs")
    args = ap.parse_args()
    if args.cache and args.cache.exists():
        gold, per = pickle.loads(args.cache.read_bytes())
    else:
        gold, per = collect(args.jsquad)
        if args.cache:
            args.cache.write_bytes(pickle.dumps((gold, per)))
    n = len(gold)
    train, held, everything = range(0, n, 2), range(1, n, 2), range(n)
    grid = [Weights(w, 1.0, d) for w in GRID_WORDS for d in GRID_DENSE]
    scored = sorted(((recall(gold, per, w, train), w) for w in grid), key=lambda x: (-x[0][0], -x[0][1]))
    print(f"Machine: {describe()}\n")
    print(f"JSQuAD v1.3 valid, {n} questions; chosen on {len(train)} (even), reported on {len(held)} (odd) held out.\n")
    print("| words / chars / dense | recall@1 train | recall@5 train | recall@1 held out | recall@5 held out | recall@1 all | recall@5 all |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    singles = [Weights(1, 0, 0), Weights(0, 1, 0), Weights(0, 0, 1)]
    for (t1, t5), w in scored[:5] + [(recall(gold, per, s, train), s) for s in singles]:
        h1, h5 = recall(gold, per, w, held)
        a1, a5 = recall(gold, per, w, everything)
        print(f"| {w.words:g} / {w.chars:g} / {w.dense:g} | {t1:.4f} | {t5:.4f} | {h1:.4f} | {h5:.4f} | {a1:.4f} | {a5:.4f} |")


if __name__ == "__main__":
    main()
