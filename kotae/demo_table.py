"""The readable table ``kotae demo`` prints: comment, outcome, answer, citations, slide."""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any

from kotae.contracts import subjects
from kotae.replay import ReplayResult

FINAL = frozenset(subjects.AIR_OUTCOMES)

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


def slide_image_of(event: Any, images: dict[str, str]) -> str | None:
    """The slide image shown with an airing: that of the cited document whose slide is the answer's
    (the top-1 document's), from ``images`` (record id -> image)."""
    cited = [c.doc_id for c in event.citations if c.slide == event.slide] + [c.doc_id for c in event.citations]
    return next((images[doc] for doc in cited if doc in images), None)


def render_air(comments: list[Any], result: ReplayResult, images: dict[str, str] | None = None) -> str:
    """What ``kotae demo --onair`` adds: what aired, in order on the voice's timeline, and why the rest did not.

    ``images``: each knowledge-base record's slide image, shown under what aired with it."""
    air = result.air or {}
    names = {raw.id: raw.author for raw in comments}
    aired, rest = [], []
    for cid in dict.fromkeys(raw.id for raw in comments):
        events = air.get(cid) or []
        final = next((e for e in reversed(events) if e.event in FINAL), None)
        if final is None:
            continue
        started = [e for e in events if e.event == "started"]
        (aired if started else rest).append((cid, started, final))
    aired.sort(key=lambda item: item[1][0].started_at or item[1][0].created_at)
    rows = ["On air, in order (t: seconds after the first answer went on air):", "─" * WIDTH]
    first = aired[0][1][0].started_at if aired else None
    for cid, started, final in aired:
        last = started[-1]
        t = (last.started_at - first).total_seconds() if first and last.started_at else 0.0
        audio_ms = final.audio_ms or last.audio_ms  # the final event's is the whole answer's audio
        audio = f"{audio_ms / 1000:.1f}s" if audio_ms else "text"
        extra = len(last.askers) - 1
        who = names.get(cid, "") + (f" +{extra} asked the same" if extra > 0 else "")
        tier = "superchat " if last.tier == "superchat" else ""
        rows.append(f"{t:6.1f}  {_pad(cid, 6)} {_pad(final.event, 9)} {_pad(audio, 6)} {tier}{_clip(who, 40)}")
        rows.append(f"{' ' * 8}→ {_clip(last.answer or '', WIDTH - 10)}")
        image = slide_image_of(last, images or {})
        if image:
            rows.append(f"{' ' * 8}  slide {last.slide}: {_clip(image, WIDTH - 20)}")
        if final.event != "finished" or final.reason:
            rows.append(f"{' ' * 10}({_clip(final.reason or '', WIDTH - 12)})")
    rows.append("Not aired:")
    for cid, _, final in rest:
        rows.append(f"  {_pad(cid, 6)} {_pad(final.event, 14)} {_clip(final.reason or '', WIDTH - 24)}")
    counts = Counter(final.event for _, _, final in aired + rest)
    rows.append("─" * WIDTH)
    rows.append(
        f"{len(aired) + len(rest)} verified answers: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    )
    return "\n".join(rows)
