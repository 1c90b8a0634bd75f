"""Retrieval quality and speed on JSQuAD, with the embedded default and no model calls.

    python bench/retrieval.py ../shared/data/jsquad-v1.3-valid.json [--limit N] [--scale 9]

Quality: the 1,145 paragraphs of JSQuAD v1.3 validation are a knowledge base (one
document per paragraph, its article title as the title); each of the 4,442
questions is a query whose answer is its own paragraph. Recall@1/@5 for words-BM25,
chars-BM25, dense, and their fusion, side by side, from one run.

Speed: the same paragraphs loaded ``--scale`` times as successive versions
(different validity periods, so ~10,000 chunks), timed load, per-query latency
(tokenise, embed, search, fuse) at that size, and peak memory.

Prints tables (and the machine) in Markdown, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.knowledge.embeddings import embedder_for  # noqa: E402
from kotae.knowledge.index import HybridSearcher, Weights, build_index, fuse, open_embedded  # noqa: E402
from kotae.knowledge.records import KBRecord  # noqa: E402
from kotae.knowledge.store import KnowledgeStore  # noqa: E402

DAY = date(2026, 11, 30)


def load_jsquad(path: Path) -> tuple[list[KBRecord], list[tuple[str, str]]]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    records, questions = [], []
    for a, article in enumerate(data):
        for p, para in enumerate(article["paragraphs"]):
            doc_id = f"p{a:03d}-{p:02d}"
            context = para["context"].split(" [SEP] ", 1)[-1]
            records.append(KBRecord(id=doc_id, kind="doc", title=article["title"], text=context, lang="ja"))
            questions += [(doc_id, qa["question"]) for qa in para["qas"]]
    return records, questions


def recall(ranked: list[list[str]], gold: list[str], k: int) -> float:
    return sum(g in r[:k] for r, g in zip(ranked, gold)) / len(gold)


def quality(records: list[KBRecord], questions: list[tuple[str, str]], work: Path) -> list[tuple[str, float, float]]:
    store = KnowledgeStore(work / "kb", "jsquad")
    store.load(records)
    embedder = embedder_for("use-multilingual-v3")
    t = time.perf_counter()
    report = build_index(store, embedder)
    print(f"# index built: {report.chunks} chunks in {report.seconds:.1f}s", file=sys.stderr)
    backend, _ = open_embedded(store)
    meta = backend.meta("jsquad")
    searcher = HybridSearcher(backend, meta, embedder, weights=Weights(1, 1, 1), pool=30)
    gold = [g for g, _ in questions]
    per_field = []
    t = time.perf_counter()
    for i, (_, q) in enumerate(questions):
        vectors = searcher.query_vectors(q)
        from kotae.knowledge.index import Search

        searches = [Search(f, v, "jsquad", "doc", DAY, 30) for f, v in vectors.items()]
        per_field.append(dict(zip(vectors, backend.search(searches))))
        if i % 1000 == 999:
            print(f"# {i + 1} queries, {time.perf_counter() - t:.0f}s", file=sys.stderr)
    configs = [
        ("BM25 words (Sudachi)", Weights(1, 0, 0)),
        ("BM25 chars (uni+bigram)", Weights(0, 1, 0)),
        ("dense (USE multilingual v3)", Weights(0, 0, 1)),
        ("BM25 words + chars", Weights(0.5, 0.5, 0)),
        ("hybrid: words + chars + dense (default)", None),
    ]
    from kotae.settings import load_settings

    s = load_settings()
    rows = []
    for name, weights in configs:
        weights = weights or Weights(s.fusion_words, s.fusion_chars, s.fusion_dense)
        ranked = []
        for results in per_field:
            use = {f: r for f, r in results.items() if getattr(weights, f) > 0}
            ranked.append(list(dict.fromkeys(h.doc_id for h in fuse(use, weights))))
        label = f"{name} [{weights.words:g}/{weights.chars:g}/{weights.dense:g}]"
        rows.append((label, recall(ranked, gold, 1), recall(ranked, gold, 5)))
    backend.close()
    return rows


def speed(records: list[KBRecord], questions: list[tuple[str, str]], scale: int, work: Path) -> dict[str, float]:
    versions = []
    for v in range(scale):
        start = DAY - timedelta(days=30 * (scale - v))
        end = None if v == scale - 1 else start + timedelta(days=29)
        for r in records:
            versions.append(r.model_copy(update={"id": f"{r.id}-v{v}", "version": str(v), "valid_from": start, "valid_to": end}))
    store = KnowledgeStore(work / "kb", "scaled")
    store.load(versions)
    embedder = embedder_for("use-multilingual-v3")
    t = time.perf_counter()
    report = build_index(store, embedder)
    load_s = time.perf_counter() - t
    backend, _ = open_embedded(store)
    from kotae.settings import load_settings

    s = load_settings()
    searcher = HybridSearcher(backend, backend.meta("scaled"), embedder, weights=Weights(s.fusion_words, s.fusion_chars, s.fusion_dense))
    latencies = []
    for _, q in questions[:500]:
        t = time.perf_counter()
        searcher.search_many(q, kinds=("doc", "faq"), day=DAY, top_k=8)
        latencies.append((time.perf_counter() - t) * 1000)
    backend.close()
    return {
        "chunks": report.chunks,
        "load_s": load_s,
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (quick check)")
    ap.add_argument("--scale", type=int, default=9, help="versions of the corpus for the speed run (9 → ~10k chunks)")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    records, questions = load_jsquad(args.jsquad)
    if args.limit:
        questions = questions[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        rows = quality(records, questions, Path(tmp))
        sp = None if args.skip_speed else speed(records, questions, args.scale, Path(tmp))
    print(f"Machine: {describe()}\n")
    print(f"JSQuAD v1.3 valid: {len(records)} paragraphs, {len(questions)} questions; embedded default, no model calls.\n")
    print("| method [weights words/chars/dense] | recall@1 | recall@5 |")
    print("|---|---:|---:|")
    for name, r1, r5 in rows:
        print(f"| {name} | {r1:.4f} | {r5:.4f} |")
    if sp:
        print(f"\nSpeed at {sp['chunks']:,} chunks ({args.scale} versions of the corpus):\n")
        print("| load (tokenise, embed, index) | query p50 | query p95 | peak RSS |")
        print("|---:|---:|---:|---:|")
        print(f"| {sp['load_s']:.1f} s | {sp['p50_ms']:.1f} ms | {sp['p95_ms']:.1f} ms | {sp['peak_rss_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
