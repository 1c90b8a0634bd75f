"""``kotae eval``: a labelled question set through the real pipeline, scored with the report's rules.

A question set is JSONL, one question a line::

    {"id": "q01", "text": "0歳の子を預けたら保育料の上限は月いくらですか", "kind": "answerable",
     "expected_doc_ids": ["childcare-2027"], "expected_facts": ["1万5千円"], "set_version": "sample-1"}

``kind`` is ``answerable`` or ``offtopic``; ``expected_doc_ids``,
``expected_facts``, ``set_version`` and ``at`` (the ISO date or time the
question is asked, default now) are optional. Every line is checked before
anything runs; a bad one stops the command with ``file:line: field``.

What is measured, per question set version, each as numerator/denominator
(``counting.ratio``; a question that ended failed or dead-lettered is a failed
attempt, outside every denominator; a question without the label a measure
needs is unknown for it):

* ``top1_doc`` — the answer's top-1 document (the one that picks the slide), or
  for an answer from the FAQ the entry it cites first, is an expected document;
* ``facts`` — every expected fact appears in the answer, compared after
  normalising width, separators and 万/億 (``1万5千円`` = ``15,000円``);
  ``facts_found`` counts single facts;
* ``answered`` — an answerable question got a verified answer;
* ``offtopic_unanswered`` — an off-topic comment was left unanswered
  (``unanswered`` or ``dropped``; asking back counts as answering);
* the outcome mix and the latency (p50, p95, max) of the completed questions.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any

import numpy as np

from kotae.contracts import AnswerV1
from kotae.jsonl import json_objects
from kotae.services.evaluator.counting import Ratio, count_judged, ratio

KINDS = ("answerable", "offtopic")
LEFT_UNANSWERED = ("unanswered", "dropped")
FAILED = ("failed", "dead_lettered")
UNVERSIONED = "unversioned"


class QuestionSetError(ValueError):
    """A question set line that cannot be used; the message names file, line and field."""


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    kind: str
    expected_doc_ids: tuple[str, ...] = ()
    expected_facts: tuple[str, ...] = ()
    set_version: str = UNVERSIONED
    at: datetime | None = None


def _strings(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise QuestionSetError(f"{where}: field '{name}': expected a list of non-empty strings")
    return tuple(v.strip() for v in value)


def _when(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        if isinstance(value, str) and len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(12, 0), tzinfo=timezone.utc)
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise QuestionSetError(f"{where}: field 'at': expected an ISO date or date-time such as 2027-04-01")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def read_question_set(path: Path) -> list[Question]:
    """Every question of ``path``, all lines checked first (:class:`QuestionSetError` on the first bad one)."""
    questions: list[Question] = []
    seen: dict[str, str] = {}
    for where, row in json_objects(Path(path), "a labelled question", QuestionSetError):
        qid = row.get("id")
        if isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip():
            raise QuestionSetError(f"{where}: field 'id': required, a non-empty string or a number")
        qid = str(qid).strip()
        if qid in seen:
            raise QuestionSetError(f"{where}: field 'id': {qid!r} already used at {seen[qid]}")
        seen[qid] = where
        text = row.get("text")
        if not isinstance(text, str) or not text.strip():
            raise QuestionSetError(f"{where}: field 'text': required, a non-empty string")
        if row.get("kind") not in KINDS:
            raise QuestionSetError(f"{where}: field 'kind': expected 'answerable' or 'offtopic', got {row.get('kind')!r}")
        version = row.get("set_version", UNVERSIONED)
        if not isinstance(version, str) or not version.strip():
            raise QuestionSetError(f"{where}: field 'set_version': expected a non-empty string")
        doc_ids = _strings(row.get("expected_doc_ids"), where, "expected_doc_ids")
        facts = _strings(row.get("expected_facts"), where, "expected_facts")
        if row["kind"] == "offtopic" and (doc_ids or facts):
            field_name = "expected_doc_ids" if doc_ids else "expected_facts"
            raise QuestionSetError(f"{where}: field '{field_name}': an off-topic question expects no documents or facts")
        questions.append(Question(qid, text, row["kind"], doc_ids, facts, version.strip(), _when(row.get("at"), where)))
    if not questions:
        raise QuestionSetError(f"{path}: no questions")
    return questions


# --- facts ---------------------------------------------------------------------------------

_UNITS = {"": 1, "千": 1_000, "万": 10_000, "億": 100_000_000}
_JP_NUMBER = re.compile(r"(?:\d+(?:\.\d+)?[億万千])+\d*")
_SEPARATORS = re.compile(r"[\s,，、・]")


def _expand(match: re.Match[str]) -> str:
    total = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)([億万千]?)", match.group(0)))
    return str(int(total)) if total == int(total) else str(total)


def normalize_fact(text: str) -> str:
    """Text as facts are compared: NFKC width, no spaces or separators, 万/億/千 written out, lower case.

    Example::

        >>> normalize_fact("月額1万5千円") == normalize_fact("月額 15,000円")
        True
    """
    text = unicodedata.normalize("NFKC", text).lower()
    text = _SEPARATORS.sub("", text)
    return _JP_NUMBER.sub(_expand, text)


def fact_found(said: str, fact: str) -> bool:
    """``fact`` in normalised ``said``, a number never matching inside a longer one (150円 is not in 1150円)."""
    wanted = normalize_fact(fact)
    if not said or not wanted:
        return False
    lead = r"(?<!\d)" if wanted[0].isdigit() else ""
    tail = r"(?![\d.])" if wanted[-1].isdigit() else ""
    return re.search(lead + re.escape(wanted) + tail, said) is not None


def facts_in(answer: str | None, facts: tuple[str, ...]) -> list[bool]:
    said = normalize_fact(answer or "")
    return [fact_found(said, f) for f in facts]


# --- scoring -------------------------------------------------------------------------------


@dataclass
class QuestionResult:
    """One question's outcome as ``kotae replay`` records it, with the answer message when there is one."""

    question: Question
    record: dict[str, Any] | None
    answer: AnswerV1 | None = None

    @property
    def outcome(self) -> str:
        return self.record["outcome"] if self.record else "missing"

    @property
    def failed(self) -> bool:
        return self.outcome in FAILED or self.record is None

    def top1(self) -> str | None:
        if self.answer is None:
            return None
        if self.answer.docs:
            return self.answer.docs[0].doc_id
        return self.answer.citations[0].doc_id if self.answer.citations else None

    def top1_hit(self) -> bool | None:
        q = self.question
        if q.kind != "answerable" or not q.expected_doc_ids:
            return None
        if self.top1() in q.expected_doc_ids:
            return True
        first_cited = self.answer.citations[0].doc_id if self.answer and self.answer.citations else None
        return first_cited in q.expected_doc_ids  # an FAQ entry never travels as a document

    def facts(self) -> list[bool]:
        text = self.answer.answer if self.answer is not None and self.answer.outcome == "verified" else None
        return facts_in(text, self.question.expected_facts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.question.id,
            "kind": self.question.kind,
            "set_version": self.question.set_version,
            "outcome": self.outcome,
            "top1_doc": self.top1(),
            "top1_hit": self.top1_hit(),
            "facts_found": self.facts(),
            "answer": self.record.get("answer") if self.record else None,
            "latency_ms": self.record.get("latency_ms") if self.record else None,
            "reason": self.record.get("reason") if self.record else "no outcome before the timeout",
        }


@dataclass
class SetScore:
    set_version: str
    attempts: int
    completed: int
    failed: int
    outcomes: dict[str, int]
    metrics: dict[str, Ratio] = field(default_factory=dict)
    latency_ms: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "set_version": self.set_version,
            "attempts": self.attempts,
            "completed": self.completed,
            "failed": self.failed,
            "outcomes": self.outcomes,
            "metrics": {k: v.as_dict() for k, v in self.metrics.items()},
            "latency_ms": self.latency_ms,
        }


def score(results: list[QuestionResult]) -> SetScore:
    """The measures of one question set version (see the module docstring)."""
    versions = {r.question.set_version for r in results}
    if len(versions) != 1:
        raise ValueError(f"score one question set version at a time, got {sorted(versions)}")
    done = [r for r in results if not r.failed]
    answerable = [r for r in done if r.question.kind == "answerable"]
    offtopic = [r for r in done if r.question.kind == "offtopic"]
    with_facts = [r for r in answerable if r.question.expected_facts]
    fact_hits = [hit for r in with_facts for hit in r.facts()]
    latencies = [float(r.record["latency_ms"]) for r in done if r.record and r.record.get("latency_ms") is not None]
    metrics = {
        "top1_doc": count_judged(r.top1_hit() for r in answerable),
        "facts": count_judged((all(r.facts()) if r.question.expected_facts else None) for r in answerable),
        "facts_found": ratio(sum(fact_hits), len(fact_hits)),
        "answered": count_judged(r.outcome == "verified" for r in answerable),
        "offtopic_unanswered": count_judged(r.outcome in LEFT_UNANSWERED for r in offtopic),
    }
    latency = (
        {"p50": round(float(np.percentile(latencies, 50)), 1), "p95": round(float(np.percentile(latencies, 95)), 1), "max": round(max(latencies), 1)}
        if latencies
        else {"p50": None, "p95": None, "max": None}
    )
    return SetScore(
        set_version=versions.pop(),
        attempts=len(results),
        completed=len(done),
        failed=len(results) - len(done),
        outcomes=dict(sorted(Counter(r.outcome for r in results).items())),
        metrics=metrics,
        latency_ms=latency,
    )


def render(scores: list[SetScore], failures: list[QuestionResult]) -> str:
    """The terminal table of ``kotae eval``: counts first, then the rate."""
    out = []
    for s in scores:
        out.append(f"question set {s.set_version}: attempts {s.attempts}  completed {s.completed}  failed {s.failed}")
        out.append("  outcomes " + ", ".join(f"{k} {v}" for k, v in s.outcomes.items()))
        out.append(f"  {'measure':<20} {'num/den':>9} {'rate':>6} {'unknown':>8}")
        for name, r in s.metrics.items():
            rate = "—" if r.rate is None else f"{r.rate:.3f}"
            out.append(f"  {name:<20} {f'{r.numerator:g}/{r.denominator:g}':>9} {rate:>6} {r.unknown:>8}")
        lat = s.latency_ms
        if lat["p50"] is not None:
            out.append(f"  latency ms           p50 {lat['p50']:.0f}  p95 {lat['p95']:.0f}  max {lat['max']:.0f}")
        out.append("")
    if failures:
        out.append("misses:")
        for r in failures:
            d = r.as_dict()
            facts = "" if not r.question.expected_facts else f" facts {d['facts_found']}"
            out.append(f"  {d['id']:<6} {d['kind']:<10} {d['outcome']:<13} top-1 {d['top1_doc']}{facts}  {(d['reason'] or '')[:70]}")
    return "\n".join(out).rstrip()


def misses(results: list[QuestionResult]) -> list[QuestionResult]:
    """Questions that failed, or missed any measure, for the listing under the table."""
    out = []
    for r in results:
        wrong = (
            r.failed
            or r.top1_hit() is False
            or (r.question.expected_facts and not all(r.facts()))
            or (r.question.kind == "offtopic" and r.outcome not in LEFT_UNANSWERED)
        )
        if wrong:
            out.append(r)
    return out
