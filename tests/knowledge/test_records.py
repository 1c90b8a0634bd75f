"""kotae.knowledge.records: loading JSONL and Markdown/YAML knowledge bases."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from kotae.knowledge.records import KBRecord, KnowledgeBaseError, detect_lang, load_records


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(path: Path, *rows: object) -> Path:
    return write(path, "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows))


DOC = {"id": "childcare", "kind": "doc", "title": "保育", "text": "保育料は月額1万5千円を上限にします。"}
FAQ = {"id": "faq-fee", "kind": "faq", "question": "保育料はいくら？", "answer": "月額1万5千円が上限です。"}


# --- loading ---------------------------------------------------------------


def test_jsonl_file_loads_docs_and_faq_in_file_order(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", DOC, "", FAQ)  # a blank line is skipped
    records = load_records(path)
    assert [r.id for r in records] == ["childcare", "faq-fee"]
    assert records[0].kind == "doc" and records[0].text == DOC["text"]
    assert records[1].kind == "faq" and records[1].answer == FAQ["answer"]


def test_jsonl_dates_are_parsed(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {**DOC, "valid_from": "2026-11-01", "valid_to": "2027-03-31"})
    (record,) = load_records(path)
    assert record.valid_from == date(2026, 11, 1)
    assert record.valid_to == date(2027, 3, 31)


def test_markdown_folder_with_front_matter_and_faq_yaml(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(
        kb / "bus-fare.md",
        '---\nid: bus-fare\ntitle: バス運賃\nsource: 政策集 p.6\nslide: 6\nversion: "2027.1"\n'
        "valid_from: 2026-11-01\n---\n\n# 運賃\n大人1回150円にします。\n",
    )
    write(kb / "faq.yaml", "- id: faq-bus\n  question: バス代は？\n  answer: 大人150円です。\n")
    records = {r.id: r for r in load_records(kb)}
    assert set(records) == {"bus-fare", "faq-bus"}
    doc = records["bus-fare"]
    assert doc.kind == "doc"  # kind defaults to doc for Markdown
    assert doc.title == "バス運賃"
    assert doc.slide == 6
    assert doc.version == "2027.1"
    assert doc.valid_from == date(2026, 11, 1)
    assert doc.text == "# 運賃\n大人1回150円にします。"  # body without the front matter
    assert records["faq-bus"].kind == "faq"  # kind defaults to faq for YAML lists


def test_markdown_id_defaults_to_file_stem_and_title_to_first_heading(tmp_path: Path) -> None:
    write(tmp_path / "kb" / "school-lunch.md", "---\nlang: ja\n---\n# 給食費の無償化\n給食費を無料にします。\n")
    (record,) = load_records(tmp_path / "kb")
    assert record.id == "school-lunch"
    assert record.title == "給食費の無償化"


def test_folder_without_records_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "kb" / "notes.txt", "nothing to load")
    with pytest.raises(KnowledgeBaseError, match="no .md, .yaml or .jsonl records"):
        load_records(tmp_path / "kb")


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseError, match="no such file or folder"):
        load_records(tmp_path / "nowhere")


def test_the_bundled_sample_loads() -> None:
    import kotae.samples

    records = load_records(Path(kotae.samples.__file__).parent / "kb")
    assert sum(r.kind == "doc" for r in records) == 17
    assert sum(r.kind == "faq" for r in records) == 10


# --- errors name file:line and field ----------------------------------------


def test_missing_id_names_file_line_and_field(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", DOC, {"kind": "doc", "text": "本文です。"})
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(path)
    assert f"{path}:2:" in str(err.value)
    assert "field 'id'" in str(err.value)


def test_bad_date_in_jsonl_names_file_line_and_field(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", DOC, {**FAQ, "valid_from": "2027-13-01"})
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(path)
    assert f"{path}:2:" in str(err.value)
    assert "field 'valid_from'" in str(err.value)


def test_quoted_bad_date_in_markdown_names_file_and_field(tmp_path: Path) -> None:
    md = write(tmp_path / "kb" / "doc.md", '---\nid: doc\nvalid_from: "2027-13-01"\n---\n本文です。\n')
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert f"{md}:3:" in str(err.value)  # the line of the field itself
    assert "field 'valid_from'" in str(err.value)


def test_unquoted_bad_date_in_markdown_front_matter_names_file_and_field(tmp_path: Path) -> None:
    md = write(tmp_path / "kb" / "doc.md", "---\nid: doc\nvalid_from: 2027-13-01\n---\n本文です。\n")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert str(md) in str(err.value)
    assert "valid_from" in str(err.value)


def test_unquoted_bad_date_in_faq_yaml_names_file(tmp_path: Path) -> None:
    faq = write(
        tmp_path / "kb" / "faq.yaml",
        "- id: f1\n  question: q?\n  answer: a.\n  valid_to: 2027-02-30\n",
    )
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert str(faq) in str(err.value)


def test_doc_without_text_is_refused(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {"id": "empty", "kind": "doc", "text": "   "})
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(path)
    assert f"{path}:1:" in str(err.value)
    assert "'text'" in str(err.value)


def test_markdown_doc_with_empty_body_is_refused(tmp_path: Path) -> None:
    md = write(tmp_path / "kb" / "empty.md", "---\nid: empty\ntitle: 空\n---\n\n")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert f"{md}:1:" in str(err.value)
    assert "'text'" in str(err.value)


def test_faq_without_answer_is_refused_with_its_line(tmp_path: Path) -> None:
    faq = write(
        tmp_path / "kb" / "faq.yaml",
        "- id: f1\n  question: 一つ目？\n  answer: はい。\n- id: f2\n  question: 二つ目？\n",
    )
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert f"{faq}:4:" in str(err.value)  # the second entry starts on line 4
    assert "'answer'" in str(err.value)


def test_faq_without_answer_in_jsonl(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {"id": "f", "kind": "faq", "question": "いつ？"})
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:1: .*'answer'"):
        load_records(path)


def test_duplicate_id_across_files_names_both(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    first = jsonl(kb / "a.jsonl", {**DOC, "id": "dup"})
    second = write(kb / "b.md", "---\nid: dup\n---\n別の本文です。\n")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(kb)
    message = str(err.value)
    assert f"{second}:1:" in message
    assert "field 'id'" in message and "'dup'" in message
    assert f"{first}:1" in message


def test_invalid_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", DOC, "{not json")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(path)
    assert f"{path}:2: invalid JSON" in str(err.value)


def test_non_object_line_is_refused(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", [1, 2])
    with pytest.raises(KnowledgeBaseError, match=r"kb\.jsonl:1: expected an object, got list"):
        load_records(path)


def test_unclosed_front_matter(tmp_path: Path) -> None:
    md = write(tmp_path / "kb" / "doc.md", "---\nid: doc\ntitle: T\n本文です。\n")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert f"{md}:1:" in str(err.value)
    assert "not closed" in str(err.value)


def test_markdown_without_front_matter(tmp_path: Path) -> None:
    write(tmp_path / "kb" / "doc.md", "# Title\nbody.\n")
    with pytest.raises(KnowledgeBaseError, match="front matter"):
        load_records(tmp_path / "kb")


def test_broken_yaml_front_matter_names_the_line(tmp_path: Path) -> None:
    md = write(tmp_path / "kb" / "doc.md", "---\ntitle: ok\nid: [1\n---\nbody.\n")
    with pytest.raises(KnowledgeBaseError) as err:
        load_records(tmp_path / "kb")
    assert f"{md}:" in str(err.value)
    assert "invalid YAML front matter" in str(err.value)


def test_valid_to_before_valid_from_is_refused(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {**DOC, "valid_from": "2027-02-01", "valid_to": "2027-01-01"})
    with pytest.raises(KnowledgeBaseError, match="valid_to 2027-01-01 is before valid_from 2027-02-01"):
        load_records(path)


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {**DOC, "valid_form": "2027-01-01"})
    with pytest.raises(KnowledgeBaseError, match="field 'valid_form'"):
        load_records(path)


def test_id_with_whitespace_is_refused(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "kb.jsonl", {**DOC, "id": "child care"})
    with pytest.raises(KnowledgeBaseError, match="field 'id'"):
        load_records(path)


# --- valid_on ----------------------------------------------------------------


def test_valid_on_is_inclusive_at_both_ends() -> None:
    record = KBRecord(id="r", kind="doc", text="t", valid_from=date(2026, 11, 1), valid_to=date(2027, 3, 31))
    assert not record.valid_on(date(2026, 10, 31))
    assert record.valid_on(date(2026, 11, 1))
    assert record.valid_on(date(2027, 3, 31))
    assert not record.valid_on(date(2027, 4, 1))


def test_open_ended_validity() -> None:
    since = KBRecord(id="r", kind="doc", text="t", valid_from=date(2026, 11, 1))
    until = KBRecord(id="r", kind="doc", text="t", valid_to=date(2026, 10, 31))
    always = KBRecord(id="r", kind="doc", text="t")
    assert since.valid_on(date(2099, 1, 1)) and not since.valid_on(date(2026, 10, 31))
    assert until.valid_on(date(1999, 1, 1)) and not until.valid_on(date(2026, 11, 1))
    assert always.valid_on(date(1970, 1, 1)) and always.valid_on(date(2999, 12, 31))


# --- detect_lang ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("保育料はいくら", "ja"),
        ("ひらがなだけ", "ja"),
        ("カタカナ", "ja"),
        ("ｻﾌﾞﾚ", "ja"),  # half-width katakana, as chat types it
        ("Is the bus free? バス", "ja"),
        ("How much is the bus fare?", "en"),
        ("888888", "en"),
        ("", "en"),
    ],
)
def test_detect_lang(text: str, lang: str) -> None:
    assert detect_lang(text) == lang


def test_record_language_falls_back_to_detection() -> None:
    assert KBRecord(id="a", kind="doc", text="The fare is 150 yen.").language == "en"
    assert KBRecord(id="b", kind="faq", question="バス代は？", answer="150円です。").language == "ja"
    assert KBRecord(id="c", kind="doc", text="The fare is 150 yen.", lang="ja").language == "ja"


# --- slide images ----------------------------------------------------------------


def test_a_slide_image_path_is_resolved_against_its_file_and_a_url_kept(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    write(kb / "slides" / "fee.png", "png")
    write(kb / "bus.md", "---\nid: bus\nslide: 6\nslide_image: slides/fee.png\n---\n大人1回150円にします。\n")
    write(
        kb / "faq.yaml",
        "- id: faq-bus\n  question: バス代は？\n  answer: 150円です。\n  slide_image: https://example.org/6.png\n",
    )
    jsonl(kb / "more.jsonl", {**DOC, "slide_image": "slides/fee.png"})
    records = {r.id: r for r in load_records(kb)}
    assert records["bus"].slide_image == str((kb / "slides" / "fee.png").resolve())
    assert records["childcare"].slide_image == records["bus"].slide_image
    assert records["faq-bus"].slide_image == "https://example.org/6.png"


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("bus.md", "---\nid: bus\ntitle: バス\nslide_image: slides/nope.png\n---\n150円です。\n", 4),
        ("faq.yaml", "- id: faq-bus\n  question: バス代は？\n  answer: 150円です。\n  slide_image: nope.png\n", 4),
        ("kb.jsonl", json.dumps({**DOC, "slide_image": "nope.png"}, ensure_ascii=False) + "\n", 1),
    ],
)
def test_a_missing_slide_image_names_the_file_line_and_field(tmp_path: Path, name: str, text: str, line: int) -> None:
    path = write(tmp_path / "kb" / name, text)
    with pytest.raises(KnowledgeBaseError, match=rf"{name}:{line}: field 'slide_image': no such file") as caught:
        load_records(tmp_path / "kb")
    assert str(path) in str(caught.value)


def test_the_bundled_sample_names_a_slide_image_for_every_record() -> None:
    from kotae.samples import __file__ as samples

    records = load_records(Path(samples).parent / "kb")
    assert records and all(r.slide_image and Path(r.slide_image).stat().st_size > 10_000 for r in records)
