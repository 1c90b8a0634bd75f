"""The word lists' files: their format, and that each is read by the code and tested entry by entry.

A test module of ``tests/language/`` that exercises lists names them in ``LEXICONS`` and runs one
test case per entry of each; this module checks that together they cover every list.
"""

from __future__ import annotations

import importlib
import unicodedata
from pathlib import Path

import pytest

from kotae.language import lexicon

ROOT = Path(__file__).resolve().parents[2]
LISTS = lexicon.names()


def _claimed() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        module = importlib.import_module(f"tests.language.{path.stem}")
        for name in getattr(module, "LEXICONS", ()):
            assert name not in out, f"{name} is claimed by {out.get(name)} and {path.stem}"
            out[name] = path.stem
    return out


def test_there_are_lists():
    assert len(LISTS) >= 10


@pytest.mark.parametrize("name", LISTS)
def test_a_list_says_what_it_is_for_and_holds_distinct_normalised_entries(name):
    assert len(lexicon.purpose(name)) > 10
    found = lexicon.entries(name)
    assert found, f"{name}.txt holds no entry"
    assert len(set(found)) == len(found), f"{name}.txt repeats {[e for e in found if found.count(e) > 1]}"
    # Text is NFKC-normalised before it is read: an entry in another form would never match.
    assert [e for e in found if unicodedata.normalize("NFKC", e) != e] == []


@pytest.mark.parametrize("name", LISTS)
def test_every_list_is_read_by_the_code_and_tested_entry_by_entry(name):
    sources = [*ROOT.joinpath("kotae").rglob("*.py"), *ROOT.joinpath("services").rglob("*.py")]
    assert any(f'"{name}"' in p.read_text(encoding="utf-8") for p in sources), f"no code reads {name}.txt"
    assert name in _claimed(), f"no tests/language/test_*.py names {name} in LEXICONS"


def test_a_claimed_list_exists():
    assert set(_claimed()) <= set(LISTS)


def test_a_malformed_list_is_refused_with_its_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "broken.txt").write_text("no purpose line\nword\n", encoding="utf-8")
    monkeypatch.setattr(lexicon.resources, "files", lambda _package: tmp_path)
    lexicon._read.cache_clear()
    try:
        with pytest.raises(lexicon.LexiconError, match=r"broken\.txt:1"):
            lexicon.entries("broken")
    finally:
        lexicon._read.cache_clear()


def test_an_entry_keeps_its_words_and_loses_its_comment(tmp_path, monkeypatch):
    (tmp_path / "demo.txt").write_text("# what the demo list is for\n# more\n\nhow much  # a phrase\n何時頃\n")
    monkeypatch.setattr(lexicon.resources, "files", lambda _package: tmp_path)
    lexicon._read.cache_clear()
    try:
        assert lexicon.entries("demo") == ("how much", "何時頃")
        assert lexicon.alternation("demo").split("|")[0] == "how\\ much"
    finally:
        lexicon._read.cache_clear()
