"""kotae.services.retriever.gate_model: the fitted gate, its weights file, and the open gate.

The fitted gate is selected with ``KOTAE_GATE_WEIGHTS`` (``fitted``: the committed weights of
``bench/fit_gate.py``; a path: another weights file; ``open``: answer every comment).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

import kotae.samples
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import load_records
from kotae.services.retriever.gate_model import FEATURES, WEIGHTS, GateModel, GateSignals
from kotae.services.retriever.logic import Retriever
from kotae.settings import Settings, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")

DAY = date(2026, 11, 30)
SAMPLE_KB = Path(kotae.samples.__file__).parent / "kb"


@pytest.fixture(scope="module")
def sample_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("sample"))
    load_knowledge_base(load_records(SAMPLE_KB), "default", settings)
    return settings


def gated(settings: Settings, weights: str, text: str):
    retriever = Retriever(settings.model_copy(update={"gate_weights": weights}))
    try:
        return retriever.retrieve(text, kb="default", day=DAY)
    finally:
        retriever.close()


def test_the_committed_weights_say_what_they_were_fitted_on_and_how_they_did_held_out() -> None:
    model = GateModel.load()
    data = json.loads(WEIGHTS.read_text(encoding="utf-8"))
    assert data["features"] == list(FEATURES)
    assert len(model.coef) == len(model.mean) == len(model.scale) == len(FEATURES)
    assert 0.0 < model.threshold < 1.0
    assert len(model.about["fitted_on"]) >= 5
    held_out = [row for row in model.about["leave_one_domain_out"] if row["gate"] == "fitted on the other five"]
    assert {row["domain"] for row in held_out} == set(model.about["fitted_on"])


def test_weights_for_other_signals_are_refused_naming_the_file(tmp_path: Path) -> None:
    data = GateModel.open_gate().as_dict()
    data["features"] = data["features"][:-1]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"old\.json.*refit"):
        GateModel.load(path)


def test_a_file_that_is_not_weights_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notes\.txt: not a gate weights file"):
        GateModel.load(path)


def test_the_score_rises_with_a_signal_of_positive_weight() -> None:
    model = GateModel([0.0] * len(FEATURES), [1.0] * len(FEATURES), [1.0] + [0.0] * (len(FEATURES) - 1), 0.0, 0.5)
    low, high = GateSignals({"best": -1.0}), GateSignals({"best": 1.0})
    assert model.probability(low) < 0.5 < model.probability(high)
    assert model.strongest(high, 1) == ["best=1.00"]


def test_the_open_gate_answers_a_comment_the_rules_leave_unanswered(sample_settings: Settings) -> None:
    text = "今日の晩ごはん何にしよう"
    assert gated(sample_settings, "", text).gate == "no_match"
    opened = gated(sample_settings, "open", text)
    assert opened.gate == "answer"
    assert opened.reason.startswith("answer: fitted gate")


def test_the_fitted_gate_answers_a_plain_question_and_stops_chatter(sample_settings: Settings) -> None:
    answered = gated(sample_settings, "fitted", "保育料っていくらになるの")
    assert answered.gate == "answer", answered.reason
    assert answered.docs[0].doc_id == "childcare-2027"
    silent = gated(sample_settings, "fitted", "今日の晩ごはん何にしよう")
    assert silent.gate == "no_match"
    # The reason says the fitted score, the threshold, and the signals that moved it most.
    assert "fitted gate" in silent.reason and "below" in silent.reason and "=" in silent.reason


def test_a_term_no_record_has_is_named_when_the_fitted_gate_stops_the_comment(sample_settings: Settings) -> None:
    result = gated(sample_settings, "fitted", "消費税は下げてくれるの？")
    assert result.gate == "no_match"
    assert result.reason.startswith("not_covered: 「消費税」")
    assert result.missing == ["消費税"]


def test_a_missing_weights_file_stops_the_retriever_naming_it(sample_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nowhere.json"):
        Retriever(sample_settings.model_copy(update={"gate_weights": str(tmp_path / "nowhere.json")}))
