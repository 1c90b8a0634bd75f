"""kotae.settings.load_settings: validated KOTAE_* settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kotae.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KOTAE_"):
            monkeypatch.delenv(name)


def test_defaults_load() -> None:
    s = load_settings()
    assert s.data_dir == Path(".kotae")
    assert s.kb == "default" and s.stream_id == "default"
    assert s.gate_answer == 0.30 and s.gate_clarify == 0.20  # calibrated on the bundled sample (docs/benchmarks.md)
    assert s.embedding_model == "use-multilingual-v3" and s.qdrant_url is None
    assert s.top_k == 8 and s.top_faq == 3 and s.top_n == 3
    assert s.max_answer_sentences == 2
    assert s.nats_url is None
    assert s.kb_dir == Path(".kotae") / "kb"


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KOTAE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KOTAE_GATE_ANSWER", "0.6")
    monkeypatch.setenv("KOTAE_TOP_K", "12")
    s = load_settings()
    assert s.data_dir == tmp_path and s.kb_dir == tmp_path / "kb"
    assert s.gate_answer == 0.6 and s.top_k == 12


def test_overrides_win_over_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KOTAE_TOP_K", "12")
    assert load_settings(top_k=4, data_dir=tmp_path).top_k == 4


def test_non_number_gate_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOTAE_GATE_ANSWER", "abc")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "KOTAE_GATE_ANSWER" in str(err.value)


def test_out_of_range_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOTAE_TOP_K", "0")
    with pytest.raises(SettingsError, match="KOTAE_TOP_K"):
        load_settings()


def test_bad_choice_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOTAE_LOG_LEVEL", "loud")
    with pytest.raises(SettingsError, match="KOTAE_LOG_LEVEL"):
        load_settings()


def test_clarify_gate_above_answer_gate_is_refused_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOTAE_GATE_ANSWER", "0.4")
    monkeypatch.setenv("KOTAE_GATE_CLARIFY", "0.5")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "KOTAE_GATE_CLARIFY" in str(err.value)
    assert "KOTAE_GATE_ANSWER" in str(err.value)


def test_equal_gates_are_allowed() -> None:
    s = load_settings(gate_answer=0.5, gate_clarify=0.5)
    assert s.gate_answer == s.gate_clarify == 0.5


def test_settings_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_settings(gate_answer=2)
