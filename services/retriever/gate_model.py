"""The gate's fitted decision: does the knowledge base answer this comment?

One logistic score over the signals the retriever already has for the comment's best
hits (coverage, cosine, how far the best topic stands out, the comment's words that no
record holds, its specific terms that no record has, whether a sentence of the best
document holds the kind of answer asked for …), in place of hand-set thresholds and
vetoes. The weights are data: ``gate_weights.json`` beside this module, written by
``bench/fit_gate.py``, which fits them on the chat-dev domains and reports each domain's
numbers with the weights fitted on the *other* domains (leave one domain out), so the
file says what it was fitted on and how it did on data it did not see.

Example::

    model = GateModel.load()             # the committed weights (KOTAE_GATE_WEIGHTS: another file)
    model.probability({"best": 0.5, ...})  # 0–1; the comment is answered at or above model.threshold
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kotae.knowledge.index import Hit, IndexMeta
from kotae.language.question_focus import QuestionFocus, holds_kind
from kotae.language.text import search_tokens, split_sentences

WEIGHTS = Path(__file__).with_name("gate_weights.json")

#: The signals, in the order of the weight vector. Each is 0–1 or a small count, the same on any
#: knowledge base (no raw BM25, whose scale depends on the corpus).
FEATURES = (
    "best",  # the rule gate's score of the best hit: 0.5 × coverage + 0.5 × cosine (cosine across languages)
    "doc_coverage",  # IDF-weighted share of the comment's words the best document holds
    "doc_cosine",  # embedding cosine of the best document
    "faq_coverage",  # … of the best FAQ entry
    "faq_cosine",
    "margin",  # the best topic's score less the next topic's
    "ratio",  # the best topic's score over the next topic's (capped)
    "crosses",  # 1 when the best document is in another language than the comment
    "unknown_share",  # IDF-weighted share of the comment's words that no record holds at all
    "words",  # the comment's content words (log)
    "specific",  # its specific terms (names, compounds) that records of its script could write (log)
    "missing_share",  # share of those that no record has under any spelling
    "asks",  # 1 when a wh-word asks for a kind of answer
    "kind_held",  # 1 when a sentence of the best document holds that kind
    "sentence_share",  # most of the comment's words one sentence of the best document holds
)


def _cap(x: float, top: float) -> float:
    return max(0.0, min(top, x))


@dataclass(frozen=True)
class GateSignals:
    """What :func:`signals` reads off one comment's hits (the values of :data:`FEATURES`)."""

    values: dict[str, float]

    def vector(self) -> list[float]:
        return [float(self.values.get(name, 0.0)) for name in FEATURES]


def signals(
    words: list[str],
    focus: QuestionFocus,
    best: float,
    docs: list[Hit],
    faq: list[Hit],
    meta: IndexMeta,
    *,
    topic_scores: list[float],
    crosses: bool,
    specific: int,
    missing: int,
    text_of: Any,
) -> GateSignals:
    """The gate's signals for one comment (``text_of``: a hit's title and text as the gate reads it)."""
    top_doc = docs[0] if docs else None
    top_faq = faq[0] if faq else None
    doc_text = text_of(top_doc) if top_doc else ""
    doc_cov = meta.coverage(words, doc_text) if top_doc and not crosses else 0.0
    faq_cov = meta.coverage(words, text_of(top_faq)) if top_faq else 0.0
    first = topic_scores[0] if topic_scores else 0.0
    second = topic_scores[1] if len(topic_scores) > 1 else 0.0
    unique = set(words)
    total = sum(meta.idf(w) for w in unique)
    unknown = sum(meta.idf(w) for w in unique if meta.df.get(w, 0) == 0)
    kind_held = 0.0
    sentence_share = 0.0
    if top_doc is not None and unique:
        for sentence in split_sentences(doc_text):
            held = unique & set(search_tokens(sentence))
            sentence_share = max(sentence_share, len(held) / len(unique))
            if focus.explicit and focus.kinds and any(holds_kind(k, sentence) for k in focus.kinds):
                kind_held = 1.0
    values = {
        "best": best,
        "doc_coverage": doc_cov,
        "doc_cosine": max(0.0, top_doc.signals.get("dense", 0.0)) if top_doc else 0.0,
        "faq_coverage": faq_cov,
        "faq_cosine": max(0.0, top_faq.signals.get("dense", 0.0)) if top_faq else 0.0,
        "margin": first - second,
        "ratio": _cap(first / second, 3.0) if second > 0 else 3.0,
        "crosses": 1.0 if crosses else 0.0,
        "unknown_share": unknown / total if total > 0 else 0.0,
        "words": math.log1p(len(unique)),
        "specific": math.log1p(specific),
        "missing_share": missing / specific if specific else 0.0,
        "asks": 1.0 if focus.explicit and focus.kinds else 0.0,
        "kind_held": kind_held,
        "sentence_share": sentence_share,
    }
    return GateSignals(values)


@dataclass(frozen=True)
class GateModel:
    """A logistic score over :data:`FEATURES` (standardised), and the probability at which to answer."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float
    about: dict[str, Any] = field(default_factory=dict)  # what it was fitted on, and how it did held out

    def probability(self, s: GateSignals) -> float:
        return self.probability_of(s.vector())

    def probability_of(self, vector: list[float]) -> float:
        z = self.intercept + sum(
            c * (x - m) / (sd or 1.0) for c, x, m, sd in zip(self.coef, vector, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def strongest(self, s: GateSignals, n: int = 2) -> list[str]:
        """The signals that moved this comment's score most, as ``name=value`` (for the reason)."""
        parts = [
            (abs(c * (x - m) / (sd or 1.0)), name, x)
            for name, c, x, m, sd in zip(FEATURES, self.coef, s.vector(), self.mean, self.scale, strict=True)
        ]
        return [f"{name}={x:.2f}" for _, name, x in sorted(parts, reverse=True)[:n]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "mean": self.mean,
            "scale": self.scale,
            "coef": self.coef,
            "intercept": self.intercept,
            "threshold": self.threshold,
            "about": self.about,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "weights") -> GateModel:
        if list(data.get("features", [])) != list(FEATURES):
            raise ValueError(f"{source}: its features {data.get('features')} are not {list(FEATURES)}; refit it")
        return cls(
            mean=[float(x) for x in data["mean"]],
            scale=[float(x) for x in data["scale"]],
            coef=[float(x) for x in data["coef"]],
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            about=dict(data.get("about", {})),
        )

    @classmethod
    def load(cls, path: Path | None = None) -> GateModel:
        path = path or WEIGHTS
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a gate weights file ({exc})") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def open_gate(cls) -> GateModel:
        """A gate that answers every comment: what the answer side does with all of them (for fitting)."""
        n = len(FEATURES)
        return cls([0.0] * n, [1.0] * n, [0.0] * n, 0.0, 0.0, {"open": True})
