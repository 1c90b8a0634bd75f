"""kotae.settings.load_settings: validated KOTAE_* settings."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kotae.settings import Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KOTAE_"):
            monkeypatch.delenv(name)


README = Path(__file__).resolve().parents[1] / "README.md"
_ROW = re.compile(r"^\| `(KOTAE_[A-Z0-9_]+)` \| `([^`]*)` \|", re.M)


def test_every_default_the_readme_documents_is_the_default_the_settings_have() -> None:
    """The configuration table is what users read: a default changed in code must change there too."""
    documented = _ROW.findall(README.read_text(encoding="utf-8"))
    assert len(documented) >= 15, "the README's configuration table was not found"
    defaults = load_settings()
    for variable, text in documented:
        if "<" in text:  # a default derived from another setting, e.g. _INBOX_<user>
            continue
        field = variable.removeprefix("KOTAE_").lower()
        assert field in Settings.model_fields, f"README documents {variable}, which is not a setting"
        value = getattr(defaults, field)
        shown = value.get_secret_value() if hasattr(value, "get_secret_value") else value
        if isinstance(shown, float):
            assert float(text) == shown, f"{variable}: README says {text}, the default is {shown}"
        else:
            assert text == str(shown), f"{variable}: README says {text}, the default is {shown}"


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


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("KOTAE_ONAIR_VOICE", "espeak", "expected openjtalk, voicevox:<base_url>|<speaker id>"),
        ("KOTAE_ONAIR_VOICE", "voicevox:localhost:50021|3", "expected openjtalk"),
        ("KOTAE_ONAIR_ENGLISH_VOICE", "en us", "should match pattern"),
        ("KOTAE_ONAIR_VOICE_RETRIES", "-1", "greater than or equal to 0"),
        ("KOTAE_ONAIR_VOICE_TIMEOUT_S", "0", "greater than 0"),
        ("KOTAE_ONAIR_VOICE_CONCURRENCY", "0", "greater than or equal to 1"),
        ("KOTAE_ONAIR_PRESYNTH", "many", "valid integer"),
    ],
)
def test_a_bad_speech_setting_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert f"{variable}: " in str(err.value) and problem in str(err.value)


def test_the_speech_settings_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOTAE_ONAIR_VOICE", "voicevox:http://127.0.0.1:10101|888753760")  # AivisSpeech's port
    monkeypatch.setenv("KOTAE_ONAIR_PRESYNTH", "5")
    s = load_settings()
    assert s.onair_voice == "voicevox:http://127.0.0.1:10101|888753760" and s.onair_presynth == 5
