"""kotae.services.retriever.calibrate: choosing the gate's thresholds from labelled questions."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

import kotae.samples
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.services.retriever.calibrate import Calibration, choose, histogram, scores_for
from kotae.services.retriever.logic import Retriever
from kotae.settings import load_settings

SAMPLES = Path(kotae.samples.__file__).parent
STREAM_DAY = date(2026, 11, 30)

scores = st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=60)


def below(values: list[float], threshold: float) -> float:
    return float(np.mean(np.array(values) < threshold))


def test_clarify_threshold_sits_just_above_the_off_topic_scores() -> None:
    offtopic = [0.0, 0.02, 0.05, 0.08, 0.1, 0.11, 0.12, 0.13, 0.14, 0.15]
    answerable = [0.25, 0.3, 0.4, 0.5, 0.6, 0.7]
    cal = choose(answerable, offtopic)
    assert cal.gate_clarify == pytest.approx(0.16)  # the highest off-topic score (95% of 10 rounds up to 10) + 0.01
    assert below(offtopic, cal.gate_clarify) == 1.0
    assert cal.gate_answer >= cal.gate_clarify
    assert below(answerable, cal.gate_answer) == 0.0  # every answerable question still answers


def test_a_few_high_off_topic_scores_may_stay_above_the_clarify_threshold() -> None:
    offtopic = [i / 100 for i in range(40)] + [0.9]  # 41 scores, one outlier
    cal = choose([0.5, 0.6, 0.95], offtopic)
    assert below(offtopic, cal.gate_clarify) >= 0.95
    assert cal.gate_clarify < 0.9  # the outlier does not drag the threshold up
    # ceil(0.95 × 41) = 39 scores must fall below: the 39th lowest is 0.38, so clarify is 0.39
    assert cal.gate_clarify == pytest.approx(0.39)


def test_answer_threshold_maximises_youdens_j() -> None:
    offtopic = [0.02, 0.05, 0.08, 0.1]
    answerable = [0.09, 0.3, 0.35, 0.5, 0.6]
    cal = choose(answerable, offtopic)
    assert cal.gate_clarify == pytest.approx(0.11)
    # J = TPR − FPR is 0.8 for any threshold in (0.1, 0.3]; the lowest such candidate wins
    assert cal.gate_answer == pytest.approx(0.11)


def test_answer_threshold_prefers_the_best_separation_over_a_high_cut() -> None:
    cal = choose([0.09, 0.12, 0.5, 0.55], [0.0, 0.02, 0.03, 0.1])
    assert cal.gate_clarify == pytest.approx(0.11)
    assert cal.gate_answer == pytest.approx(0.11)  # J = 0.75 there, 0.5 at 0.5


def test_answer_threshold_may_equal_the_clarify_threshold_whatever_the_float_noise() -> None:
    cal = choose([0.2149, 0.5], [0.2])
    assert cal.gate_clarify == pytest.approx(0.21)
    assert cal.gate_answer == pytest.approx(0.21)


def test_answer_threshold_is_never_below_clarify() -> None:
    cal = choose([0.01, 0.02], [0.5, 0.6, 0.7])  # labels that make no sense
    assert cal.gate_clarify == pytest.approx(0.71)
    assert cal.gate_answer >= cal.gate_clarify


def test_without_off_topic_questions_the_clarify_threshold_is_minimal() -> None:
    cal = choose([0.3, 0.4], [])
    assert cal.gate_clarify == pytest.approx(0.01)
    assert cal.gate_answer >= cal.gate_clarify


@given(answerable=scores, offtopic=scores)
@hsettings(max_examples=150, deadline=None)
def test_choose_invariants(answerable: list[float], offtopic: list[float]) -> None:
    cal = choose(answerable, offtopic)
    assert below(offtopic, cal.gate_clarify) >= 0.95
    assert cal.gate_answer >= cal.gate_clarify
    for kind, r in cal.rates(cal.gate_answer, cal.gate_clarify).items():
        assert r["answer"] + r["clarify"] + r["no_match"] == pytest.approx(1.0), kind
        assert all(0.0 <= r[k] <= 1.0 for k in ("answer", "clarify", "no_match"))
    assert cal.rates(cal.gate_answer, cal.gate_clarify)["offtopic"]["no_match"] >= 0.95


def test_rates_count_each_band_and_add_up_to_one() -> None:
    cal = Calibration(answerable=[0.1, 0.25, 0.3, 0.9], offtopic=[0.0, 0.05, 0.2], gate_clarify=0.2, gate_answer=0.3)
    rates = cal.rates(answer=0.3, clarify=0.2)
    assert rates["answerable"] == {"answer": 0.5, "clarify": 0.25, "no_match": 0.25, "count": 4.0}
    assert rates["offtopic"] == pytest.approx({"answer": 0.0, "clarify": 1 / 3, "no_match": 2 / 3, "count": 3.0})
    for r in rates.values():
        assert r["answer"] + r["clarify"] + r["no_match"] == pytest.approx(1.0)


def test_rates_of_an_empty_set_are_zero() -> None:
    rates = Calibration([], [], 0.2, 0.3).rates(0.3, 0.2)
    assert rates["answerable"] == {"answer": 0.0, "clarify": 0.0, "no_match": 0.0, "count": 0.0}


def test_calibrating_on_the_sample_questions(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    load_knowledge_base(load_records(SAMPLES / "kb"), "default", settings)
    questions = [
        json.loads(line) for line in (SAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line
    ]
    retriever = Retriever(settings)
    try:
        answerable, offtopic = scores_for(retriever, questions, "default", STREAM_DAY)
    finally:
        retriever.close()
    assert len(answerable) == sum(q["kind"] == "answerable" for q in questions)
    assert len(offtopic) == sum(q["kind"] == "offtopic" for q in questions)
    cal = choose(answerable, offtopic)
    rates = cal.rates(cal.gate_answer, cal.gate_clarify)
    assert rates["offtopic"]["no_match"] >= 0.95
    assert rates["answerable"]["answer"] + rates["answerable"]["clarify"] >= 0.9
    # the shipped defaults are consistent with what calibration suggests for the sample
    assert max(offtopic) < settings.gate_clarify <= settings.gate_answer
    assert np.mean(np.array(answerable) >= settings.gate_clarify) >= 0.9

    png = tmp_path / "out" / "gate.png"
    histogram(cal, png, "sample")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
