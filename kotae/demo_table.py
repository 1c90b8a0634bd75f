"""The readable table ``kotae demo`` prints: comment, outcome, answer, citations, slide."""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any

from kotae.replay import ReplayResult

WIDTH = 100


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _clip(text: str, width: int) -> str:
    if _width(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        if used + w > width - 1:
            return out + "…"
        out += ch
        used += w
    return out


def _pad(text: str, width: int) -> str:
    text = _clip(text, width)
    return text + " " * max(0, width - _width(text))


def _wrap(text: str, width: int) -> list[str]:
    lines, line, used = [], "", 0
    for ch in text:
        w = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        if used + w > width:
            lines.append(line)
            line, used = "", 0
        line += ch
        used += w
    if line:
        lines.append(line)
    return lines


def render(comments: list[Any], result: ReplayResult) -> str:
    rows = [
        f"{_pad('id', 6)} {_pad('outcome', 14)} {_pad('slide', 5)} comment → answer",
        "─" * WIDTH,
    ]
    indent = " " * 28
    shown: set[str] = set()
    for raw in comments:
        if raw.id in shown:
            continue
        shown.add(raw.id)
        rec = result.records.get(raw.id)
        outcome = rec["outcome"] if rec else "(no outcome)"
        slide = "" if not rec or rec["slide"] is None else str(rec["slide"])
        rows.append(f"{_pad(raw.id, 6)} {_pad(outcome, 14)} {_pad(slide, 5)} {_clip(raw.text, WIDTH - 28)}")
        if not rec:
            continue
        if rec["answer"]:
            for i, line in enumerate(_wrap(rec["answer"], WIDTH - 30)):
                rows.append(f"{indent}{'→ ' if i == 0 else '  '}{line}")
        for c in rec["citations"]:
            rows.append(f"{indent}  [{c['n']}] {c['doc_id']} — {c['source'] or ''}")
        if rec["outcome"] != "verified" and rec["reason"]:
            rows.append(f"{indent}  ({_clip(rec['reason'], WIDTH - 32)})")
    counts = Counter(r["outcome"] for r in result.records.values())
    rows.append("─" * WIDTH)
    rows.append(
        f"{len(result.records)} comments, "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + (f"; {result.resends} resent duplicate(s) ignored" if result.resends else "")
    )
    if result.evaluations:
        faith = [e.faithfulness for e in result.evaluations.values() if e.faithfulness.value is not None]
        if faith:
            num = sum(m.numerator or 0 for m in faith)
            den = sum(m.denominator or 0 for m in faith)
            rows.append(
                f"evaluator ({next(iter(result.evaluations.values())).method}): faithfulness {num:.0f}/{den:.0f} claims supported "
                f"over {len(faith)} verified answers; {len(result.evaluations)} answers scored"
            )
    return "\n".join(rows)
