"""Counting rules shared by ``kotae report`` and ``kotae eval``.

A rate is kept as its numerator and denominator; it is None when the
denominator is 0 (nothing was judged), never 0. Counts that cannot be counts
(negative, fractional where whole numbers are due, a numerator above its
denominator) are refused rather than printed. Failed attempts and unknown
judgements are kept apart from every denominator and shown beside it, and
groups that differ in version, stream, mode, model or prompt version are never
pooled (:func:`group_key`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from kotae.contracts import EvaluationV1
from kotae.services.evaluator.logic import check_summary

JUDGEMENTS = ("cited", "supported", "timely", "relevant", "complete")
SCORES = ("faithfulness", "answer_relevancy", "context_precision")
#: Faithfulness pools claims (supported claims ÷ claims over all answers); the
#: other scores are per answer, pooled as their mean (sum of scores ÷ answers).
POOLED_BY_PARTS = {"faithfulness"}


class InvalidCount(ValueError):
    """A numerator/denominator pair that cannot be a count."""


@dataclass(frozen=True)
class Ratio:
    """``numerator`` of ``denominator`` judged; ``unknown`` more could not be judged."""

    numerator: float
    denominator: float
    unknown: int = 0
    omitted: int = 0

    @property
    def rate(self) -> float | None:
        return round(self.numerator / self.denominator, 4) if self.denominator else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rate": self.rate}

    def text(self) -> str:
        """``3/4 (75%)``: counts first, so a small sample is never read as a bare percentage."""
        rate = "—" if self.rate is None else f"{self.rate:.0%}"
        return f"{self.numerator:g}/{self.denominator:g} ({rate})"


def ratio(numerator: float, denominator: float, *, unknown: int = 0, omitted: int = 0, whole: bool = True) -> Ratio:
    """A checked :class:`Ratio`; :class:`InvalidCount` for counts that cannot be.

    ``whole=False`` allows a fractional numerator (a sum of per-answer scores).

    Example::

        >>> ratio(0, 0).rate is None
        True
        >>> ratio(4, 10).text()
        '4/10 (40%)'
    """
    for name, value in (
        ("numerator", numerator),
        ("denominator", denominator),
        ("unknown", unknown),
        ("omitted", omitted),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise InvalidCount(f"{name} must be a number, got {value!r}")
        if value < 0:
            raise InvalidCount(f"{name} must not be negative, got {value!r}")
    for name, value in (("denominator", denominator), ("unknown", unknown), ("omitted", omitted)):
        if value != int(value):
            raise InvalidCount(f"{name} must be a whole count, got {value!r}")
    if whole and numerator != int(numerator):
        raise InvalidCount(f"numerator must be a whole count, got {numerator!r}")
    if numerator > denominator + 1e-9:
        raise InvalidCount(f"numerator {numerator!r} exceeds denominator {denominator!r}")
    num = int(numerator) if whole else round(float(numerator), 4)
    return Ratio(num, int(denominator), int(unknown), int(omitted))


def count_judged(values: Iterable[bool | None]) -> Ratio:
    """True counts over true+false; None counts as unknown, outside the denominator."""
    values = list(values)
    true = sum(1 for v in values if v is True)
    false = sum(1 for v in values if v is False)
    return ratio(true, true + false, unknown=len(values) - true - false)


# --- groups -----------------------------------------------------------------------------

GROUP_FIELDS = ("version", "stream_id", "mode", "model", "prompt_version")


def group_key(ev: EvaluationV1) -> tuple[str, ...]:
    """What must be equal for two evaluations to be counted together.

    * version — the question set's (``kotae eval``), else the knowledge base's;
    * mode — ``offline`` when no hosted model took part, neither in the
      pipeline nor as the judge, else ``model``;
    * model — the judge's model and each stage's, e.g.
      ``judge=openai:gpt-4.1;generator=openai:gpt-4.1-mini`` (``-`` offline);
    * prompt_version — the judge's prompts (``-`` for the offline method).

    The stages' methods are not a key: how far a comment went (dropped at
    ingest, answered) changes which stages name one, and splitting on that
    would separate a question set's off-topic comments from its answers.
    """
    version = f"set:{ev.set_version}" if ev.set_version else f"kb:{ev.kb or '?'}"
    prompts = ",".join(f"{k}={v}" for k, v in sorted(ev.prompt_versions.items())) or "-"
    models = ([f"judge={ev.model}"] if ev.model else []) + [f"{k}={v}" for k, v in sorted(ev.answer_models.items())]
    mode = "model" if models or ev.mode == "model" else "offline"
    return (version, ev.stream_id, mode, ";".join(models) or "-", prompts)


def score_ratio(evaluations: list[EvaluationV1], name: str) -> Ratio:
    """One RAGAS score over the completed evaluations of a group."""
    values = [getattr(e, name) for e in evaluations]
    judged = [m for m in values if m is not None and m.value is not None]
    unknown = sum(1 for m in values if m is not None and m.value is None)
    omitted = sum(1 for m in values if m is None)
    if name in POOLED_BY_PARTS:
        num = sum(m.numerator or 0 for m in judged)
        den = sum(m.denominator or 0 for m in judged)
        return ratio(num, den, unknown=unknown, omitted=omitted)
    return ratio(sum(m.value or 0.0 for m in judged), len(judged), unknown=unknown, omitted=omitted, whole=False)


def judgement_ratio(evaluations: list[EvaluationV1], name: str) -> Ratio:
    """One per-answer judgement (cited, supported, …) over the completed evaluations of a group."""
    return count_judged(getattr(e.judgement, name).value if e.judgement else None for e in evaluations)


def summarize_group(evaluations: list[EvaluationV1]) -> dict[str, Any]:
    """Attempts, completed, failed, the outcome mix and every metric of one group."""
    for e in evaluations:
        if e.judgement is not None:
            check_summary(e.judgement.supported, e.claims, where=f"evaluation {e.message_id} ({e.comment_id})")
    completed = [e for e in evaluations if e.status == "ok"]
    metrics: dict[str, Any] = {}
    for name in SCORES:
        metrics[name] = score_ratio(completed, name).as_dict()
    for name in JUDGEMENTS:
        metrics[name] = judgement_ratio(completed, name).as_dict()
    return {
        "attempts": len(evaluations),
        "completed": len(completed),
        "failed": len(evaluations) - len(completed),
        "cached": sum(1 for e in evaluations if e.cached_from is not None),
        "outcomes": dict(sorted(Counter(e.outcome for e in evaluations).items())),
        "first_at": min(e.created_at for e in evaluations).isoformat(),
        "last_at": max(e.created_at for e in evaluations).isoformat(),
        "metrics": metrics,
    }


def grouped(evaluations: list[EvaluationV1]) -> dict[tuple[str, ...], list[EvaluationV1]]:
    groups: dict[tuple[str, ...], list[EvaluationV1]] = defaultdict(list)
    for ev in evaluations:
        groups[group_key(ev)].append(ev)
    return dict(sorted(groups.items()))


def summarize(evaluations: list[EvaluationV1]) -> list[dict[str, Any]]:
    """One row per group; see the module docstring for the rules."""
    return [
        {"group": dict(zip(GROUP_FIELDS, key, strict=True)), **summarize_group(evs)}
        for key, evs in grouped(evaluations).items()
    ]
