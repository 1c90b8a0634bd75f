"""``kotae report``: the evaluator's aggregate tables, as text, JSON or a PNG chart.

One group per (question set or knowledge base version, stream, mode, models,
judge prompt versions); groups are never pooled. Each
metric is shown as numerator/denominator and rate, beside the group's attempts,
completed and failed counts (and how many of the answers came from ingest's answer
cache: scored like the others, counted apart) and the metric's unknowns (see ``counting.py``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import nats
from nats.js.api import DeliverPolicy

from kotae.bus.connection import connect_options
from kotae.contracts import EvaluationV1, subjects
from kotae.services.evaluator.counting import JUDGEMENTS, SCORES, grouped, judgement_ratio, score_ratio, summarize
from kotae.settings import Settings

METRICS = SCORES + JUDGEMENTS


async def collect_evaluations(settings: Settings, url: str, *, idle: float = 0.5) -> list[EvaluationV1]:
    """Every evaluation in the audit stream (records that no longer parse are skipped)."""
    nc = await nats.connect(**connect_options(settings, url))
    try:
        js = nc.jetstream()
        try:
            total = (await js.stream_info(subjects.STREAM_EVALUATIONS)).state.messages
        except nats.js.errors.NotFoundError:
            return []
        out: list[EvaluationV1] = []
        if total == 0:
            return out
        sub = await js.subscribe(subjects.EVALUATION, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
        seen = 0
        while seen < total:
            try:
                msg = await sub.next_msg(timeout=idle * 10)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            seen += 1
            try:
                out.append(EvaluationV1.model_validate_json(msg.data))
            except ValueError:
                continue
        await sub.unsubscribe()
        return out
    finally:
        await nc.close()


def _group_title(group: dict[str, str]) -> str:
    return f"{group['version']} · stream {group['stream_id']} · {group['mode']} · model {group['model']} · prompts {group['prompt_version']}"


def render_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no evaluations yet (run `kotae demo` or `kotae replay` first)"
    out = []
    for row in rows:
        out.append(_group_title(row["group"]))
        out.append(
            f"  attempts {row['attempts']}  completed {row['completed']}  failed {row['failed']}  "
            f"cached {row['cached']};  outcomes " + ", ".join(f"{k} {v}" for k, v in row["outcomes"].items())
        )
        out.append(f"  {'metric':<18} {'num/den':>12} {'rate':>6} {'unknown':>8} {'omitted':>8}")
        for name in METRICS:
            m = row["metrics"][name]
            rate = "—" if m["rate"] is None else f"{m['rate']:.3f}"
            frac = f"{m['numerator']:g}/{m['denominator']:g}"
            out.append(f"  {name:<18} {frac:>12} {rate:>6} {m['unknown']:>8} {m['omitted']:>8}")
        out.append("")
    return "\n".join(out).rstrip()


def render_report(evaluations: list[EvaluationV1], *, as_json: bool = False) -> str:
    rows = summarize(evaluations)
    if as_json:
        return json.dumps(rows, ensure_ascii=False, indent=2)
    return render_table(rows)


# --- rates over time ----------------------------------------------------------------------


def _bucket_size(first: datetime, last: datetime, buckets: int) -> timedelta:
    span = max((last - first).total_seconds(), 1.0)
    for seconds in (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400):
        if span / seconds <= buckets:
            return timedelta(seconds=seconds)
    return timedelta(days=30)


def rates_over_time(evaluations: list[EvaluationV1], *, buckets: int = 24) -> list[dict[str, Any]]:
    """Per group and time bucket, every metric's ratio (same rules as the table)."""
    if not evaluations:
        return []
    first = min(e.created_at for e in evaluations)
    size = _bucket_size(first, max(e.created_at for e in evaluations), buckets)
    series = []
    for key, evs in grouped(evaluations).items():
        by_bucket: dict[datetime, list[EvaluationV1]] = defaultdict(list)
        for e in evs:
            by_bucket[first + size * int((e.created_at - first) / size)].append(e)
        points = []
        for start, items in sorted(by_bucket.items()):
            done = [e for e in items if e.status == "ok"]
            rates = {n: score_ratio(done, n).as_dict() for n in SCORES} | {
                n: judgement_ratio(done, n).as_dict() for n in JUDGEMENTS
            }
            points.append(
                {"start": start.isoformat(), "attempts": len(items), "failed": len(items) - len(done), "metrics": rates}
            )
        series.append({"group": " · ".join(key), "points": points})
    return series


def write_png(evaluations: list[EvaluationV1], path: Path) -> Path:
    """A chart of every metric's rate over time, one line per group; buckets with no judged answer are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = rates_over_time(evaluations)
    fig, axes = plt.subplots(4, 2, figsize=(12, 12), sharex=True, sharey=True)
    starts = [datetime.fromisoformat(p["start"]) for s in series for p in s["points"]]
    for ax, name in zip(axes.flat, METRICS, strict=False):
        for s in series:
            xs = [datetime.fromisoformat(p["start"]) for p in s["points"]]
            ms = [p["metrics"][name] for p in s["points"]]
            ax.plot(xs, [float("nan") if m["rate"] is None else m["rate"] for m in ms], marker="o", label=s["group"])
            for x, m in zip(
                xs, ms, strict=True
            ):  # counts beside each point: a small sample must not pass for a percentage
                if m["rate"] is not None:
                    ax.annotate(
                        f"{m['numerator']:g}/{m['denominator']:g}",
                        (x, m["rate"]),
                        textcoords="offset points",
                        xytext=(4, 4),
                        fontsize=7,
                    )
        ax.set_title(name)
        ax.set_ylim(-0.05, 1.1)
        ax.grid(alpha=0.3)
    if starts:
        pad = max((max(starts) - min(starts)) / 20, timedelta(minutes=30))
        axes.flat[0].set_xlim(min(starts) - pad, max(starts) + pad)
    if series:
        axes.flat[0].legend(fontsize=7, loc="lower left")
    else:
        fig.suptitle("no evaluations yet")
    fig.autofmt_xdate()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
