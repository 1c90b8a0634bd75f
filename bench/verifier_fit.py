"""Refit the verifier's slot weights and margin on the development split, next to the shipped ones.

    python bench/verifier_fit.py [--squad PATH] [--seed N]

Builds the JSQuAD cases exactly as bench/verifier.py does and keeps the bare answers of its
development split (even articles): the right ones, ``<answer>です[1]。`` (form b), and the wrong
ones (variant 5). Each is verified as the bench verifies it, and the places the verifier weighed
it at come from ``alignment.slot_places`` — the code path of the verdict, so the signs are the
ones it scored. Held-out answers are never looked at.

- Weights (SLOT_WEIGHTS): every right bare answer whose evidence addresses the question and
  that has rival places is a softmax over all its places, the answer's own as the target;
  maximise the mean log-likelihood less 0.01 × |w|² / 2 by 300 steps of gradient ascent (step
  0.5) from zero; then rescale so that "near" is 1 and round to 0.05, as SLOT_WEIGHTS is.
- Margin (SLOT_MARGIN): right bare answers kept and wrong ones caught on dev for margins
  0.30–0.80, with the shipped and the refitted weights; the shipped margin is the widest that
  still catches 85% of the wrong ones.

Prints Markdown tables (and the machine).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe  # noqa: E402
from verifier import DATA, Case, build_cases  # noqa: E402

from kotae.citations import numbered_blocks, strip_markers  # noqa: E402
from kotae.contracts import Evidence  # noqa: E402
from kotae.language.answer_slot import SLOT_MARGIN, SLOT_WEIGHTS, SlotPlaces  # noqa: E402
from kotae.language.text import split_sentences  # noqa: E402
from kotae.services.verifier.alignment import slot_places  # noqa: E402
from kotae.services.verifier.logic import verify  # noqa: E402

SIGNS = list(SLOT_WEIGHTS)
L2 = 0.01
STEPS = 300
RATE = 0.5
ROUND_TO = 0.05
MARGINS = [round(0.30 + 0.05 * i, 2) for i in range(11)]
CAUGHT_AT_LEAST = 0.85


@dataclass(frozen=True)
class Weighed:
    """One bare answer: right or wrong, whether anything but its place fails it, and its places."""

    right: bool
    passes_otherwise: bool
    places: SlotPlaces | None  # None when the verdict does not turn on the answer's place


def weigh(case: Case) -> Weighed:
    docs = [Evidence(doc_id="ctx", chunk_id="ctx", text=case.context)]
    verdict = verify(case.answer, docs, [], question=case.question)
    sentences = split_sentences(case.answer)
    if len(sentences) != 1:  # the answer span itself holds a full stop: judged sentence by sentence
        return Weighed(case.group == "short", verdict.passed, None)
    evidence = [(b.n, b.text) for b in numbered_blocks(docs, [])]
    places = slot_places(strip_markers(sentences[0]), evidence, case.question)
    if places is None or places.fills(SLOT_MARGIN):
        return Weighed(case.group == "short", verdict.passed, places)
    # Failed on its place: then that finding is one reason, and any other reason fails it anyway.
    return Weighed(case.group == "short", len(verdict.reasons) == 1, places)


def signs(places: tuple[dict[str, float], ...]) -> np.ndarray:
    return np.array([[p[k] for k in SIGNS] for p in places], dtype=float).reshape(len(places), len(SIGNS))


def fit(groups: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, float]:
    """Weights maximising the mean log-probability of each group's answer places under a softmax
    over all its places (L2, gradient ascent from zero); and that mean log-probability."""
    X = np.vstack([np.vstack([a, r]) for a, r in groups])
    sizes = np.array([len(a) + len(r) for a, r in groups])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    group = np.repeat(np.arange(len(groups)), sizes)
    target = np.concatenate([np.arange(len(a) + len(r)) < len(a) for a, r in groups])
    w = np.zeros(len(SIGNS))
    for _ in range(STEPS):
        s = X @ w
        e = np.exp(s - np.maximum.reduceat(s, starts)[group])
        p = e / np.add.reduceat(e, starts)[group]
        on_target = np.add.reduceat(np.where(target, p, 0.0), starts)
        q = np.where(target, p / (on_target[group] + 1e-12), 0.0)
        w += RATE * ((q - p) @ X / len(groups) - L2 * w)
    return w, float(np.mean(np.log(on_target + 1e-12)))


def sweep(answers: list[Weighed], weights: dict[str, float]) -> dict[float, tuple[float, float]]:
    """Right bare answers kept and wrong ones caught, per margin, with ``weights``."""
    out = {}
    for margin in MARGINS:
        passed = [a.passes_otherwise and (a.places is None or a.places.fills(margin, weights)) for a in answers]
        right = [p for p, a in zip(passed, answers, strict=True) if a.right]
        wrong = [p for p, a in zip(passed, answers, strict=True) if not a.right]
        out[margin] = (sum(right) / len(right), 1 - sum(wrong) / len(wrong))
    return out


def widest(table: dict[float, tuple[float, float]]) -> float | None:
    ok = [m for m, (_, caught) in table.items() if caught >= CAUGHT_AT_LEAST]
    return max(ok) if ok else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--squad", type=Path, default=DATA / "jsquad-v1.3-valid.json")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    t0 = time.perf_counter()
    cases = [c for c in build_cases(args.squad, args.seed) if c.split == "dev" and c.group in ("short", "short_wrong")]
    answers = [weigh(c) for c in cases]
    t1 = time.perf_counter()
    groups = [
        (signs(a.places.answer), signs(a.places.rivals))
        for a in answers
        if a.right and a.passes_otherwise and a.places is not None and a.places.addressed and a.places.rivals
    ]
    raw, loglik = fit(groups)
    t2 = time.perf_counter()
    scaled = raw / raw[SIGNS.index("near")]
    refit = {k: round(round(v / ROUND_TO) * ROUND_TO, 2) for k, v in zip(SIGNS, scaled, strict=True)}

    right = sum(a.right for a in answers)
    print(f"Machine: {describe()}\n")
    print(
        f"{len(answers)} dev bare answers ({right} right, {len(answers) - right} wrong) built and weighed in "
        f"{t1 - t0:.1f} s; weights fitted on {len(groups)} right answers with rival places in {t2 - t1:.1f} s "
        f"(mean log-likelihood {loglik:.3f}).\n"
    )
    print("| sign | shipped | fitted | fitted, near = 1 | fitted, rounded |")
    print("|---|---:|---:|---:|---:|")
    for k, r, s in zip(SIGNS, raw, scaled, strict=True):
        print(f"| {k} | {SLOT_WEIGHTS[k]:.2f} | {r:.3f} | {s:.3f} | {refit[k]:.2f} |")
    far = max(SIGNS, key=lambda k: abs(scaled[SIGNS.index(k)] - SLOT_WEIGHTS[k]))
    print(
        f"\nLargest difference from the shipped weights (near = 1): {far}, "
        f"{abs(scaled[SIGNS.index(far)] - SLOT_WEIGHTS[far]):.3f}."
    )

    shipped, refitted = sweep(answers, SLOT_WEIGHTS), sweep(answers, refit)
    print(
        f"\nMargin sweep on dev: right bare answers kept, wrong ones (variant 5) caught. SLOT_MARGIN = {SLOT_MARGIN}.\n"
    )
    print("| margin | kept, shipped weights | caught | kept, refitted weights | caught |")
    print("|---:|---:|---:|---:|---:|")
    for m in MARGINS:
        mark = " ← SLOT_MARGIN" if abs(m - SLOT_MARGIN) < 1e-9 else ""
        print(
            f"| {m:.2f}{mark} | {shipped[m][0]:.3f} | {shipped[m][1]:.3f} | {refitted[m][0]:.3f} | {refitted[m][1]:.3f} |"
        )
    print(
        f"\nWidest margin still catching {CAUGHT_AT_LEAST:.0%}: {widest(shipped)} with the shipped weights, "
        f"{widest(refitted)} with the refitted ones."
    )
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
