"""Retrieval quality and speed on JSQuAD, with the embedded default and no model calls.

    python bench/retrieval.py ../shared/data/jsquad-v1.3-valid.json [--limit N] [--scale 9] [--rounds 2]

Quality: the 1,145 paragraphs of JSQuAD v1.3 validation are a knowledge base (one
document per paragraph, its article title as the title); each of the 4,442
questions is a query whose answer is its own paragraph. Each question's three
searches (words, chars, dense; 30 results each) run once through the real index and
are fused with the index's own ``fuse``; then the question is searched once more as
the retriever does by default (fusion, then the second stage's rescoring, see
``kotae.knowledge.rescore``). Recall@1/@5 counts documents, for each signal alone,
the first stage and the default, on the even-numbered questions (where the fusion
and rescoring weights were chosen, see ``bench/fusion_weights.py`` and
``bench/rescoring.py``), the odd-numbered ones (held out) and all.

Speed: the same paragraphs loaded ``--scale`` times as successive versions
(different validity periods, so ~10,000 chunks): the load (tokenise, embed, index),
then one comment's retrieval as the retriever runs it (tokenise, embed, search,
fuse, read the candidates, rescore) for 500 questions, the default and the first
stage alone in turn on the same question with the embedding memo emptied, so every
call embeds — and the retriever's whole step as a comment gets it (the comment rewritten in
the records' words, the searches, the gate); ``--rounds`` repeats
the whole pass (the machine is shared, so look at the spread). Peak RSS of the
process last.

Prints Markdown tables (and the machine), ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402

from kotae.knowledge.embeddings import Embedder, embedder_for  # noqa: E402
from kotae.knowledge.index import HybridSearcher, Scored, Search, Weights, build_index, fuse, open_embedded  # noqa: E402
from kotae.knowledge.records import KBRecord  # noqa: E402
from kotae.knowledge.store import KnowledgeStore  # noqa: E402
from kotae.services.retriever.logic import Retriever  # noqa: E402
from kotae.settings import load_settings  # noqa: E402

DAY = date(2026, 11, 30)
POOL = 30
# Ranking by the two lexical signals only: the query is still embedded, and the kept
# hits' cosines are read from their stored vectors (the gate needs them).
LEXICAL = Weights(words=0.75, chars=1.0, dense=0.0)


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


def default_weights() -> Weights:
    s = load_settings()
    return Weights(s.fusion_words, s.fusion_chars, s.fusion_dense)


def collect(
    records: list[KBRecord], questions: list[tuple[str, str]], work: Path, *, ranked: list[list[str]] | None = None
) -> list[dict[str, list[Scored]]]:
    """Each question's words, chars and dense results (``POOL`` each), from the real index.

    With ``ranked``, each question's documents as the default searcher ranks them
    (first stage and rescoring) are appended to it.
    """
    store = KnowledgeStore(work / "kb", "jsquad")
    store.load(records)
    embedder = embedder_for("use-multilingual-v3")
    report = build_index(store, embedder)
    print(f"# index built: {report.chunks} chunks in {report.seconds:.1f}s", file=sys.stderr)
    backend, _ = open_embedded(store)
    meta = backend.meta("jsquad")
    assert meta is not None
    searcher = HybridSearcher(backend, meta, embedder, weights=Weights(1, 1, 1), pool=POOL)
    default = HybridSearcher(
        backend, meta, embedder, weights=default_weights(), pool=POOL, rescore_pool=load_settings().rescore_pool
    )
    per_question = []
    started = time.perf_counter()
    try:
        for i, (_, q) in enumerate(questions):
            vectors = searcher.query_vectors(q)
            searches = [Search(f, v, "jsquad", "doc", DAY, POOL) for f, v in vectors.items()]
            per_question.append(dict(zip(vectors, backend.search(searches), strict=True)))
            if ranked is not None:
                hits = default.search_many(q, kinds=("doc",), day=DAY, top_k=POOL)["doc"]
                ranked.append(list(dict.fromkeys(h.doc_id for h in hits)))
            if i % 1000 == 999:
                print(f"# {i + 1} queries, {time.perf_counter() - started:.0f}s", file=sys.stderr)
    finally:
        backend.close()
    return per_question


def ranked_docs(results: dict[str, list[Scored]], weights: Weights) -> list[str]:
    use = {f: r for f, r in results.items() if getattr(weights, f) > 0}
    return list(dict.fromkeys(h.doc_id for h in fuse(use, weights)))


def recall(gold: list[str], per: list[dict[str, list[Scored]]], weights: Weights, idx: range) -> tuple[float, float]:
    return recall_of(gold, [ranked_docs(per[i], weights) if i in idx else [] for i in range(len(gold))], idx)


def recall_of(gold: list[str], ranked: list[list[str]], idx: range) -> tuple[float, float]:
    r1 = sum(ranked[i][:1] == [gold[i]] for i in idx)
    r5 = sum(gold[i] in ranked[i][:5] for i in idx)
    return r1 / len(idx), r5 / len(idx)


def splits(n: int) -> tuple[range, range, range]:
    """Even-numbered questions (choosing), odd-numbered (held out), all."""
    return range(0, n, 2), range(1, n, 2), range(n)


def quality_configs() -> list[tuple[str, Weights]]:
    default = default_weights()
    configs = [
        ("BM25 words (Sudachi) alone", Weights(1, 0, 0)),
        ("BM25 chars (uni+bigrams) alone", Weights(0, 1, 0)),
        ("dense (USE multilingual v3) alone", Weights(0, 0, 1)),
        ("hybrid, default weights (KOTAE_FUSION_*), first stage only", default),
    ]
    if default != LEXICAL:
        configs.append(("hybrid, lexical ranking (dense for the gate only)", LEXICAL))
    return configs


def quality(
    gold: list[str], per: list[dict[str, list[Scored]]], ranked: list[list[str]]
) -> list[tuple[str, Weights, list[float]]]:
    rows = []
    for name, weights in quality_configs():
        cells: list[float] = []
        for idx in splits(len(gold)):
            cells += recall(gold, per, weights, idx)
        rows.append((name, weights, cells))
    cells = []
    for idx in splits(len(gold)):
        cells += recall_of(gold, ranked, idx)
    rows.append(
        (f"hybrid + rescoring of the top {load_settings().rescore_pool} (the default)", default_weights(), cells)
    )
    return rows


def forget(embedder: Embedder) -> None:
    """Empty the embedder's memo, so that the next call really embeds."""
    memo = getattr(embedder, "_memo", None)
    if memo is not None:
        memo.data.clear()


def speed(records: list[KBRecord], questions: list[tuple[str, str]], scale: int, rounds: int, work: Path) -> dict:
    versions = []
    for v in range(scale):
        start = DAY - timedelta(days=30 * (scale - v))
        end = None if v == scale - 1 else start + timedelta(days=29)
        for r in records:
            versions.append(
                r.model_copy(update={"id": f"{r.id}-v{v}", "version": str(v), "valid_from": start, "valid_to": end})
            )
    store = KnowledgeStore(work / "kb", "scaled")
    store.load(versions)
    embedder = embedder_for("use-multilingual-v3")
    load_avg_before = os.getloadavg()[0]
    t = time.perf_counter()
    report = build_index(store, embedder)
    load_s = time.perf_counter() - t
    backend, _ = open_embedded(store)
    meta = backend.meta("scaled")
    assert meta is not None
    rescore_pool = load_settings().rescore_pool
    configs = {
        f"default (hybrid + rescoring of {rescore_pool})": (default_weights(), rescore_pool),
        "first stage only (KOTAE_RESCORE_POOL=0)": (default_weights(), 0),
    }
    searchers = {
        name: HybridSearcher(backend, meta, embedder, weights=w, rescore_pool=r) for name, (w, r) in configs.items()
    }
    texts = [q for _, q in questions[:500]]
    whole = "the retriever's whole step (rewrite, search, gate)"
    retriever = Retriever(load_settings(data_dir=work))
    latencies: dict[str, list[float]] = {name: [] for name in [*searchers, whole, "embedding alone"]}
    load_avg = []
    try:
        for s in searchers.values():  # warm up
            s.search_many(texts[0], kinds=("doc", "faq"), day=DAY, top_k=24)
        retriever.retrieve(texts[0], kb="scaled", day=DAY)
        for _ in range(rounds):
            load_avg.append(os.getloadavg()[0])
            for q in texts:
                for name, s in searchers.items():
                    forget(embedder)
                    t = time.perf_counter()
                    s.search_many(q, kinds=("doc", "faq"), day=DAY, top_k=24)
                    latencies[name].append((time.perf_counter() - t) * 1000)
                forget(embedder)
                t = time.perf_counter()
                retriever.retrieve(q, kb="scaled", day=DAY)
                latencies[whole].append((time.perf_counter() - t) * 1000)
                forget(embedder)
                t = time.perf_counter()
                embedder.embed([q], "query")
                latencies["embedding alone"].append((time.perf_counter() - t) * 1000)
    finally:
        backend.close()
        retriever.close()
    return {
        "chunks": report.chunks,
        "load_s": load_s,
        "load_avg": [load_avg_before, *load_avg, os.getloadavg()[0]],
        "configs": configs,
        "latency": {name: (float(np.percentile(v, 50)), float(np.percentile(v, 95))) for name, v in latencies.items()},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions (quick check)")
    ap.add_argument("--scale", type=int, default=9, help="versions of the corpus for the speed run (9 → ~10k chunks)")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the 500 timed questions")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument(
        "--skip-quality", action="store_true", help="only the speed part (to repeat it on a quieter machine)"
    )
    args = ap.parse_args()
    records, questions = load_jsquad(args.jsquad)
    if args.limit:
        questions = questions[: args.limit]
    gold = [g for g, _ in questions]
    with tempfile.TemporaryDirectory() as tmp:
        ranked: list[list[str]] = []
        rows = [] if args.skip_quality else quality(gold, collect(records, questions, Path(tmp), ranked=ranked), ranked)
        sp = None if args.skip_speed else speed(records, questions, args.scale, args.rounds, Path(tmp))
    train, held, _ = splits(len(gold))
    print(f"Machine: {describe()}\n")
    print(
        f"JSQuAD v1.3 valid: {len(records)} paragraphs, {len(questions)} questions; embedded default, no model calls; "
        f"train = {len(train)} even-numbered questions, held out = {len(held)} odd-numbered.\n"
    )
    if rows:
        print(
            "| method [weights words / chars / dense] | recall@1 train | recall@5 train | recall@1 held out | recall@5 held out | recall@1 all | recall@5 all |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
    for name, w, cells in rows:
        print(f"| {name} [{w.words:g} / {w.chars:g} / {w.dense:g}] | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
    if sp:
        loads = ", ".join(f"{x:.1f}" for x in sp["load_avg"])
        print(
            f"\nSpeed at {sp['chunks']:,} chunks ({args.scale} versions of the corpus), 500 questions × {args.rounds} rounds; "
            f"load average over the run: {loads}.\n"
        )
        print(f"Load (tokenise, embed, index): {sp['load_s']:.1f} s. Peak RSS: {sp['peak_rss_mb']:.0f} MB.\n")
        print("| one comment's retrieval [weights words / chars / dense] | searches | p50 | p95 |")
        print("|---|---:|---:|---:|")
        for name, (p50, p95) in sp["latency"].items():
            config = sp["configs"].get(name)
            if name.startswith("the retriever's"):
                print(f"| {name}, as a comment is handled | 6 | {p50:.1f} ms | {p95:.1f} ms |")
            elif config is None:
                print(f"| {name} (USE, one comment) | 0 | {p50:.1f} ms | {p95:.1f} ms |")
            else:
                w = config[0]
                n = 2 * len(w.fields)
                print(f"| {name} [{w.words:g} / {w.chars:g} / {w.dense:g}] | {n} | {p50:.1f} ms | {p95:.1f} ms |")


if __name__ == "__main__":
    main()
