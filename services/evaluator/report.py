"""``kotae report``: the evaluator's aggregate tables.

Groups never pool different streams or method combinations; every rate shows
its numerator and denominator, and unjudgeable answers (null metrics) are
counted apart from the judged ones. Faithfulness is pooled over claims; answer
relevancy and context precision are means over the judged answers.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from typing import Any

import nats
from nats.js.api import DeliverPolicy

from kotae.contracts import EvaluationV1, subjects
from kotae.settings import Settings


async def collect_evaluations(settings: Settings, url: str, *, idle: float = 0.5) -> list[EvaluationV1]:
    """Every evaluation in the audit stream."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        total = (await js.stream_info(subjects.STREAM_EVALUATIONS)).state.messages
        out: list[EvaluationV1] = []
        if total == 0:
            return out
        sub = await js.subscribe(subjects.EVALUATION, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
        while len(out) < total:
            try:
                msg = await sub.next_msg(timeout=idle * 10)
            except (asyncio.TimeoutError, nats.errors.TimeoutError):
                break
            try:
                out.append(EvaluationV1.model_validate_json(msg.data))
            except ValueError:
                continue
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


def _group_key(ev: EvaluationV1) -> tuple[str, str]:
    methods = ",".join(f"{k}={v}" for k, v in sorted(ev.methods.items()))
    return ev.stream_id, f"{ev.method}|{methods}"


#: Faithfulness pools claims (supported claims ÷ claims over all answers); the
#: others are per-answer scores, pooled as their mean (sum of scores ÷ answers).
POOLED_BY_PARTS = {"faithfulness"}


def _metric(evs: list[EvaluationV1], name: str) -> dict[str, Any]:
    values = [getattr(e, name) for e in evs]
    judged = [m for m in values if m is not None and m.value is not None]
    unknown = sum(1 for m in values if m is not None and m.value is None)
    omitted = sum(1 for m in values if m is None)
    if name in POOLED_BY_PARTS:
        num = sum(m.numerator or 0 for m in judged)
        den = sum(m.denominator or 0 for m in judged)
    else:
        num = sum(m.value or 0.0 for m in judged)
        den = len(judged)
    return {
        "judged": len(judged),
        "unknown": unknown,
        "omitted": omitted,
        "numerator": round(num, 4),
        "denominator": round(den, 4),
        "rate": round(num / den, 4) if den else None,
    }


def summarize(evaluations: list[EvaluationV1]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[EvaluationV1]] = defaultdict(list)
    for ev in evaluations:
        groups[_group_key(ev)].append(ev)
    rows = []
    for (stream_id, methods), evs in sorted(groups.items()):
        rows.append(
            {
                "stream_id": stream_id,
                "methods": methods,
                "answers": len(evs),
                "failed_evaluations": sum(1 for e in evs if e.status == "failed"),
                "outcomes": dict(Counter(e.outcome for e in evs)),
                "faithfulness": _metric(evs, "faithfulness"),
                "answer_relevancy": _metric(evs, "answer_relevancy"),
                "context_precision": _metric(evs, "context_precision"),
            }
        )
    return rows


def render_report(evaluations: list[EvaluationV1], *, as_json: bool = False) -> str:
    rows = summarize(evaluations)
    if as_json:
        return json.dumps(rows, ensure_ascii=False, indent=2)
    if not rows:
        return "no evaluations yet (run `kotae demo` or `kotae replay` first)"
    out = []
    for row in rows:
        out.append(f"stream {row['stream_id']} · {row['methods']}")
        out.append(
            f"  answers {row['answers']} (failed evaluations {row['failed_evaluations']}); outcomes "
            + ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items()))
        )
        out.append(f"  {'metric':<18} {'rate':>6} {'num/den':>12} {'judged':>7} {'unknown':>8} {'omitted':>8}")
        for name in ("faithfulness", "answer_relevancy", "context_precision"):
            m = row[name]
            rate = "—" if m["rate"] is None else f"{m['rate']:.3f}"
            frac = f"{m['numerator']:g}/{m['denominator']:g}"
            out.append(f"  {name:<18} {rate:>6} {frac:>12} {m['judged']:>7} {m['unknown']:>8} {m['omitted']:>8}")
    return "\n".join(out)
