"""``kotae calibrate``: choose the gate's thresholds from labelled questions.

Each question (JSONL ``{"id","text","kind":"answerable"|"offtopic"}``) is
retrieved exactly as a comment would be and its gate score recorded. The
clarify threshold is set just above the off-topic scores (so that at least
``offtopic_target`` of them end as no_match); the answer threshold is the one
that best separates answerable from off-topic questions (Youden's J) but never
below the clarify threshold. Both distributions go into a PNG histogram.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from kotae.language.text import normalize
from kotae.services.retriever.logic import Retriever


@dataclass(frozen=True)
class Calibration:
    answerable: list[float]
    offtopic: list[float]
    gate_clarify: float
    gate_answer: float

    def rates(self, answer: float, clarify: float) -> dict[str, dict[str, float]]:
        out = {}
        for kind, scores in (("answerable", self.answerable), ("offtopic", self.offtopic)):
            s = np.array(scores) if scores else np.zeros(0)
            n = max(len(s), 1)
            out[kind] = {
                "answer": float((s >= answer).sum() / n),
                "clarify": float(((s >= clarify) & (s < answer)).sum() / n),
                "no_match": float((s < clarify).sum() / n),
                "count": float(len(s)),
            }
        return out


def scores_for(retriever: Retriever, questions: list[dict], kb: str, day: date) -> tuple[list[float], list[float]]:
    answerable, offtopic = [], []
    for q in questions:
        score = retriever.retrieve(normalize(q["text"]), kb=kb, day=day).top_score
        (answerable if q["kind"] == "answerable" else offtopic).append(score)
    return answerable, offtopic


def choose(answerable: list[float], offtopic: list[float], offtopic_target: float = 0.95) -> Calibration:
    off = np.sort(np.array(offtopic)) if offtopic else np.zeros(1)
    k = min(len(off) - 1, int(np.ceil(offtopic_target * len(off))) - 1)
    clarify = round(float(off[max(k, 0)]) + 0.01, 2)
    candidates = sorted(set(round(x, 2) for x in answerable + offtopic + [clarify]))
    best_t, best_j = clarify, -1.0
    for t in candidates:
        if t < clarify:
            continue
        tpr = float(np.mean(np.array(answerable) >= t)) if answerable else 0.0
        fpr = float(np.mean(np.array(offtopic) >= t)) if offtopic else 0.0
        if tpr - fpr > best_j + 1e-9:
            best_t, best_j = t, tpr - fpr
    return Calibration(answerable, offtopic, round(clarify, 3), round(max(best_t, clarify), 3))


def histogram(cal: Calibration, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=110)
    bins = np.linspace(0, 1, 41)
    ax.hist(cal.answerable, bins=bins, alpha=0.6, label=f"answerable ({len(cal.answerable)})", color="#2b8a3e")
    ax.hist(cal.offtopic, bins=bins, alpha=0.6, label=f"off-topic ({len(cal.offtopic)})", color="#c92a2a")
    ax.axvline(cal.gate_clarify, color="#495057", linestyle="--", label=f"clarify ≥ {cal.gate_clarify:.2f}")
    ax.axvline(cal.gate_answer, color="#1864ab", linestyle="-", label=f"answer ≥ {cal.gate_answer:.2f}")
    ax.set_xlabel("gate score (0.5 × word coverage + 0.5 × embedding similarity)")
    ax.set_ylabel("questions")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
