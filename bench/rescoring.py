"""Second-stage rescoring of the fused candidates on JSQuAD (``kotae.knowledge.rescore``).

    python bench/rescoring.py ../shared/data/jsquad-v1.3-valid.json [--cache FILE] [--limit N]

Each question is searched once through the real index (embedded default, no model
calls) with the default fusion weights; the 30 best chunks are read back from the
index (payload, stored dense and words vectors) and described by the second stage's
features (see :mod:`kotae.knowledge.rescore`). Rows: the first stage alone; each
feature added to it alone, with the weight that does best on the even-numbered
questions (from a grid); all features weighted by pairwise logistic regression on
the even-numbered questions (the gold chunk against each other candidate among the
first 10; the first-stage score's weight fixed at 1) — the weights to copy into
``RescoreWeights``; and the shipped ``RescoreWeights``. Recall counts documents,
reported on the even (chosen on), odd (held out) and all questions; then the time
the features and the ordering take per question.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from retrieval import DAY, POOL, default_weights, load_jsquad, splits  # noqa: E402

from kotae.knowledge.embeddings import embedder_for  # noqa: E402
from kotae.knowledge.index import HybridSearcher, Search, build_index, fuse, open_embedded  # noqa: E402
from kotae.knowledge.records import KBRecord  # noqa: E402
from kotae.knowledge.rescore import FEATURES, Candidate, RescoreQuery, RescoreWeights, features  # noqa: E402
from kotae.knowledge.store import KnowledgeStore  # noqa: E402

CANDIDATES = 30
PAIRS_FROM = 10  # negatives for the regression: the candidates a gold chunk has to beat for the top 5
GRID = [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0]


def collect(records: list[KBRecord], questions: list[tuple[str, str]], work: Path) -> tuple[list, list[float]]:
    """Per question: (doc ids, feature rows) of the top candidates; and ms per question for the features."""
    store = KnowledgeStore(work / "kb", "jsquad")
    store.load(records)
    embedder = embedder_for("use-multilingual-v3")
    build_index(store, embedder)
    backend, _ = open_embedded(store)
    meta = backend.meta("jsquad")
    assert meta is not None
    weights = default_weights()
    searcher = HybridSearcher(backend, meta, embedder, weights=weights, pool=POOL)
    out, timings = [], []
    started = time.perf_counter()
    try:
        for i, (_, q) in enumerate(questions):
            vectors = searcher.query_vectors(q)
            searches = [Search(f, v, "jsquad", "doc", DAY, POOL) for f, v in vectors.items()]
            hits = fuse(dict(zip(vectors, backend.search(searches), strict=True)), weights)[:CANDIDATES]
            full = backend.points([h.point_id for h in hits], dense=True, words=True)
            hits = [h for h in hits if h.point_id in full]
            qvec = searcher.embed(q)
            t = time.perf_counter()
            query = RescoreQuery.of(q, qvec, meta)
            candidates = [
                Candidate(
                    fused=h.score,
                    title=full[h.point_id].payload.get("title") or "",
                    text=full[h.point_id].payload["text"],
                    vector=full[h.point_id].dense,
                    words=full[h.point_id].words or frozenset(),
                )
                for h in hits
            ]
            rows = features(query, candidates)
            timings.append((time.perf_counter() - t) * 1000)
            out.append(([h.doc_id for h in hits], rows))
            if i % 1000 == 999:
                print(f"# {i + 1} queries, {time.perf_counter() - started:.0f}s", file=sys.stderr)
    finally:
        backend.close()
    return out, timings


def recall(gold: list[str], per: list, w: np.ndarray, idx: range) -> tuple[float, float]:
    r1 = r5 = 0
    for i in idx:
        docs, rows = per[i]
        if not docs:
            continue
        order = np.argsort(-(rows @ w), kind="stable")
        ranked = list(dict.fromkeys(docs[j] for j in order))
        r1 += ranked[:1] == [gold[i]]
        r5 += gold[i] in ranked[:5]
    return r1 / len(idx), r5 / len(idx)


def pairwise_weights(gold: list[str], per: list, idx: range, l2: float = 1e-3, steps: int = 3000) -> np.ndarray:
    """Logistic regression on (gold − other) feature differences, the first-stage score's weight fixed at 1."""
    diffs = []
    for i in idx:
        docs, rows = per[i]
        g = [j for j, d in enumerate(docs) if d == gold[i]]
        if not g:
            continue
        diffs += [rows[g[0]] - rows[j] for j in range(min(PAIRS_FROM, len(docs))) if docs[j] != gold[i]]
    x = np.array(diffs, dtype=np.float64)
    base, x = x[:, 0], x[:, 1:]
    scale = x.std(0) + 1e-9
    xs = x / scale
    w = np.zeros(x.shape[1])
    for _ in range(steps):  # plain gradient descent: a handful of features, a convex loss
        z = base + xs @ w
        w -= 0.5 * (-(xs * (1 / (1 + np.exp(z)))[:, None]).mean(0) + 2 * l2 * w)
    return np.concatenate([[1.0], w / scale]).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (quick check)")
    ap.add_argument("--cache", type=Path, help="keep the candidates and their features here between runs")
    args = ap.parse_args()
    if args.cache and args.cache.exists():
        gold, per, timings = pickle.loads(args.cache.read_bytes())
    else:
        records, questions = load_jsquad(args.jsquad)
        if args.limit:
            questions = questions[: args.limit]
        gold = [g for g, _ in questions]
        with tempfile.TemporaryDirectory() as tmp:
            per, timings = collect(records, questions, Path(tmp))
        if args.cache:
            args.cache.write_bytes(pickle.dumps((gold, per, timings)))
    train, held, everything = splits(len(gold))
    n = len(FEATURES)
    rows: list[tuple[str, list[float]]] = []

    def row(name: str, w: np.ndarray) -> None:
        cells: list[float] = []
        for idx in (train, held, everything):
            cells += recall(gold, per, w, idx)
        rows.append((name, cells))

    first = np.eye(n, dtype=np.float32)[0]
    row("first stage (hybrid, default weights)", first)
    for k, name in enumerate(FEATURES[1:], start=1):
        best = max(
            GRID, key=lambda g: tuple(reversed(recall(gold, per, first + np.eye(n, dtype=np.float32)[k] * g, train)))
        )
        row(f"+ {name} × {best:g}", first + np.eye(n, dtype=np.float32)[k] * best)
    fitted = pairwise_weights(gold, per, train)
    row("+ all, pairwise logistic regression [" + " / ".join(f"{x:.2f}" for x in fitted) + "]", fitted)
    shipped = RescoreWeights()
    row(
        "+ all, shipped RescoreWeights [" + " / ".join(f"{getattr(shipped, f):g}" for f in FEATURES) + "]",
        shipped.vector(),
    )
    print(f"Machine: {describe()}\n")
    print(
        f"JSQuAD v1.3 valid, {len(gold)} questions; top {CANDIDATES} fused chunks rescored; "
        f"weights chosen on {len(train)} (even), held out {len(held)} (odd).\n"
    )
    print(
        "| ranking | recall@1 train | recall@5 train | recall@1 held out | recall@5 held out | recall@1 all | recall@5 all |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, cells in rows:
        print(f"| {name} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
    print(
        f"\nFeatures of {CANDIDATES} candidates per comment: p50 {np.percentile(timings, 50):.1f} ms, "
        f"p95 {np.percentile(timings, 95):.1f} ms. Weights in the order {' / '.join(FEATURES)}."
    )


if __name__ == "__main__":
    main()
