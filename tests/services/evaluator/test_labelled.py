"""kotae.services.evaluator.labelled: question sets, fact matching, and the measures of ``kotae eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kotae.contracts import AnswerV1, Citation, CommentV1, Evidence
from kotae.services.evaluator.labelled import (
    Question,
    QuestionResult,
    QuestionSetError,
    facts_in,
    normalize_fact,
    read_question_set,
    score,
)

SAMPLE = Path(__file__).resolve().parents[3] / "kotae" / "samples" / "questions.jsonl"


def write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = {"id": "q1", "text": "保育料はいくら？", "kind": "answerable", "expected_doc_ids": ["childcare-2027"], "expected_facts": ["1万5千円"], "set_version": "v1"}


def test_the_bundled_question_set_reads() -> None:
    questions = read_question_set(SAMPLE)
    assert len(questions) == 32
    assert {q.set_version for q in questions} == {"sample-1"}
    assert {q.kind for q in questions} == {"answerable", "offtopic"}


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("{not json", "invalid JSON"),
        ({**GOOD, "id": None}, "field 'id'"),
        ({**GOOD, "text": "  "}, "field 'text'"),
        ({**GOOD, "kind": "maybe"}, "field 'kind'"),
        ({**GOOD, "expected_doc_ids": "childcare-2027"}, "field 'expected_doc_ids'"),
        ({**GOOD, "expected_facts": [1]}, "field 'expected_facts'"),
        ({**GOOD, "set_version": 3}, "field 'set_version'"),
        ({**GOOD, "at": "next tuesday"}, "field 'at'"),
        ({**GOOD, "kind": "offtopic"}, "field 'expected_doc_ids'"),
    ],
)
def test_a_bad_line_is_refused_with_file_line_and_field(tmp_path: Path, row: object, field: str) -> None:
    path = write(tmp_path, {**GOOD, "id": "q0"}, row)
    with pytest.raises(QuestionSetError) as err:
        read_question_set(path)
    assert str(err.value).startswith(f"{path}:2: ")
    assert field in str(err.value)


def test_a_repeated_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(QuestionSetError, match=r":2: field 'id': 'q1' already used at .*:1"):
        read_question_set(write(tmp_path, GOOD, GOOD))


@pytest.mark.parametrize(
    ("answer", "fact"),
    [
        ("月額1万5千円を上限にします", "1万5千円"),
        ("月額15,000円を上限にします", "1万5千円"),
        ("a cap of 15,000 yen a month", "15,000 yen"),
        ("ＭＩＮＡＴＯ　ＬＯＯＰ", "minato loop"),
        ("市の負担は18億円です", "18億円"),
        ("1万8000台を新しくします", "1万8千台"),
    ],
)
def test_facts_match_across_width_separators_and_man_oku(answer: str, fact: str) -> None:
    assert facts_in(answer, (fact,)) == [True]


def test_a_number_never_matches_inside_a_longer_one() -> None:
    assert facts_in("運賃は1150円です", ("150円",)) == [False]
    assert facts_in("運賃は150円です", ("150円",)) == [True]
    assert facts_in(None, ("150円",)) == [False]
    assert normalize_fact("1億2000万円") == "120000000円"


def _answer(qid: str, outcome: str, text: str | None, doc: str | None) -> AnswerV1:
    c = CommentV1(comment_id=qid, stream_id="s", author="a", text="q", normalized="q")
    docs = [Evidence(doc_id=doc, chunk_id=f"{doc}#1", text="t")] if doc else []
    return AnswerV1(comment_id=qid, stream_id="s", comment=c, outcome=outcome, answer=text, docs=docs,
                    citations=[Citation(n=1, doc_id=doc)] if doc and text else [])  # fmt: skip


def result(q: Question, outcome: str, text: str | None = None, doc: str | None = None, latency: float = 100.0) -> QuestionResult:
    if outcome == "missing":
        return QuestionResult(q, None)
    record = {"comment_id": q.id, "outcome": outcome, "answer": text, "latency_ms": latency, "reason": outcome}
    answer = None if outcome == "dead_lettered" else _answer(q.id, outcome, text, doc)
    return QuestionResult(q, record, answer)


def Q(qid: str, kind: str = "answerable", docs: tuple[str, ...] = ("d1",), facts: tuple[str, ...] = ("150円",)) -> Question:
    if kind == "offtopic":
        docs, facts = (), ()
    return Question(qid, "text", kind, docs, facts, "v1")


def test_measures_follow_the_report_counting_rules() -> None:
    results = [
        result(Q("a1"), "verified", "運賃は150円です[1]。", "d1", 100),  # right slide, right fact
        result(Q("a2"), "verified", "運賃は200円です[1]。", "d2", 300),  # wrong slide, wrong fact
        result(Q("a3", docs=(), facts=()), "verified", "何か[1]。", "d1", 200),  # unlabelled: unknown
        result(Q("a4"), "unanswered", None, None, 50),  # answerable left unanswered: misses both
        result(Q("a5"), "dead_lettered"),  # failed attempt: outside every denominator
        result(Q("a6"), "missing"),  # no outcome before the timeout: failed too
        result(Q("o1", "offtopic"), "dropped", None, None, 10),
        result(Q("o2", "offtopic"), "clarify", "どれ？", None, 20),  # asking back is not leaving it
    ]
    s = score(results)
    assert (s.attempts, s.completed, s.failed) == (8, 6, 2)
    m = {k: (r.numerator, r.denominator, r.unknown) for k, r in s.metrics.items()}
    assert m["top1_doc"] == (1, 3, 1)
    assert m["facts"] == (1, 3, 1)
    assert m["facts_found"] == (1, 3, 0)
    assert m["answered"] == (3, 4, 0)
    assert m["offtopic_unanswered"] == (1, 2, 0)
    assert s.outcomes == {"clarify": 1, "dead_lettered": 1, "dropped": 1, "missing": 1, "unanswered": 1, "verified": 3}
    assert s.latency_ms["max"] == 300


def test_an_empty_category_gives_no_rate_not_zero() -> None:
    s = score([result(Q("a1"), "verified", "150円[1]。", "d1")])
    assert s.metrics["offtopic_unanswered"].rate is None
    assert s.metrics["offtopic_unanswered"].denominator == 0
