"""Choose the retrieval fusion weights on half of JSQuAD, report on the other half.

    python bench/fusion_weights.py ../shared/data/jsquad-v1.3-valid.json [--cache FILE]

Runs each question's three searches (words, chars, dense; 30 results each) once
through the real index (``retrieval.collect``), then fuses them offline with every
weight combination of a small grid. Weights are picked on the even-numbered
questions and reported on the odd-numbered ones (held out) and on all; recall
counts documents. The first rows are the five best on the training half, then the
current default and each signal alone.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from retrieval import collect, default_weights, load_jsquad, recall, splits  # noqa: E402

from kotae.knowledge.index import Weights  # noqa: E402

GRID_WORDS = [0, 0.25, 0.5, 0.75, 1.0]
GRID_DENSE = [0, 0.1, 0.2, 0.3, 0.5, 0.8]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jsquad", type=Path)
    ap.add_argument("--cache", type=Path, help="keep the per-question search results here between runs")
    args = ap.parse_args()
    if args.cache and args.cache.exists():
        gold, per = pickle.loads(args.cache.read_bytes())
    else:
        records, questions = load_jsquad(args.jsquad)
        gold = [g for g, _ in questions]
        with tempfile.TemporaryDirectory() as tmp:
            per = collect(records, questions, Path(tmp))
        if args.cache:
            args.cache.write_bytes(pickle.dumps((gold, per)))
    train, held, everything = splits(len(gold))
    grid = [Weights(w, 1.0, d) for w in GRID_WORDS for d in GRID_DENSE]
    scored = sorted(((recall(gold, per, w, train), w) for w in grid), key=lambda x: (-x[0][0], -x[0][1]))
    print(f"Machine: {describe()}\n")
    print(
        f"JSQuAD v1.3 valid, {len(gold)} questions; chosen on {len(train)} (even), reported on {len(held)} (odd) held out.\n"
    )
    print(
        "| words / chars / dense | recall@1 train | recall@5 train | recall@1 held out | recall@5 held out | recall@1 all | recall@5 all |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    extra = [default_weights(), Weights(1, 0, 0), Weights(0, 1, 0), Weights(0, 0, 1)]
    for (t1, t5), w in scored[:5] + [(recall(gold, per, x, train), x) for x in extra]:
        h1, h5 = recall(gold, per, w, held)
        a1, a5 = recall(gold, per, w, everything)
        print(
            f"| {w.words:g} / {w.chars:g} / {w.dense:g} | {t1:.4f} | {t5:.4f} | {h1:.4f} | {h5:.4f} | {a1:.4f} | {a5:.4f} |"
        )


if __name__ == "__main__":
    main()
