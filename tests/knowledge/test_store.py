"""kotae.knowledge.store: chunking and the on-disk knowledge base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kotae.knowledge.records import KBRecord, KnowledgeBaseError, load_records
from kotae.knowledge.store import MAX_CHUNK_CHARS, KnowledgeStore, chunk_record
from kotae.language.text import split_sentences

JA_SENTENCES = [f"保育の説明その{i}は、とても大切な内容を含んでいます。" for i in range(30)]


def doc(text: str, *, id: str = "d1", version: str | None = "1", lang: str | None = None, **kw: object) -> KBRecord:
    return KBRecord(id=id, kind="doc", title="T", text=text, version=version, lang=lang, **kw)


# --- chunking --------------------------------------------------------------------


def test_long_japanese_doc_is_split_into_whole_sentences_under_the_limit() -> None:
    record = doc("".join(JA_SENTENCES), lang="ja")
    chunks = chunk_record(record)
    assert len(chunks) > 1
    bodies = [c.text for c in chunks]
    for body in bodies:
        assert len(body) <= MAX_CHUNK_CHARS
        # every piece is a whole sentence of the source
        assert all(s in JA_SENTENCES for s in split_sentences(body))
    # nothing is lost or repeated, order kept
    assert [s for body in bodies for s in split_sentences(body)] == JA_SENTENCES


def test_english_chunks_join_sentences_with_spaces() -> None:
    sentences = [f"Sentence number {i} explains one part of the plan." for i in range(20)]
    chunks = chunk_record(doc(" ".join(sentences), lang="en"), max_chars=120)
    assert len(chunks) > 1
    assert [s for c in chunks for s in split_sentences(c.text)] == sentences
    assert all(c.text == " ".join(split_sentences(c.text)) for c in chunks)


def test_a_sentence_longer_than_the_limit_stays_whole() -> None:
    long = "あ" * 50 + "です。"
    chunks = chunk_record(doc(f"短い文です。{long}次の文です。", lang="ja"), max_chars=20)
    assert long in [c.text for c in chunks]


def test_chunks_follow_headings_and_carry_them() -> None:
    text = "# 保育\n保育料は月額1万5千円です。第2子は無料です。\n\n## バス\nバスの運賃は150円です。"
    chunks = chunk_record(doc(text, lang="ja"))
    assert [c.text for c in chunks] == [
        "保育\n保育料は月額1万5千円です。第2子は無料です。",
        "バス\nバスの運賃は150円です。",
    ]


def test_heading_is_repeated_on_each_chunk_of_its_section() -> None:
    text = "# 子育て\n" + "".join(JA_SENTENCES[:12]) + "\n# 交通\nバスは150円です。"
    chunks = chunk_record(doc(text, lang="ja"), max_chars=100)
    childcare = [c for c in chunks if "保育" in c.text]
    assert len(childcare) > 1
    assert all(c.text.startswith("子育て\n") for c in childcare)
    assert chunks[-1].text == "交通\nバスは150円です。"
    assert not any("交通" in c.text and "保育" in c.text for c in chunks)


def test_faq_is_one_chunk_of_question_and_answer() -> None:
    faq = KBRecord(id="f", kind="faq", question="バス代は？", answer="150円です。")
    (chunk,) = chunk_record(faq)
    assert chunk.text == "バス代は？\n150円です。"
    assert chunk.doc_id == "f" and chunk.kind == "faq"


def test_chunk_ids_are_stable_for_the_same_content() -> None:
    text = "# 保育\n保育料は月額1万5千円です。\n\n# バス\nバスの運賃は150円です。"
    first = [c.chunk_id for c in chunk_record(doc(text))]
    second = [c.chunk_id for c in chunk_record(doc(text))]
    assert first == second
    assert len(set(first)) == len(first)
    assert all(cid.startswith("d1#") for cid in first)


def test_chunk_id_changes_with_text_and_with_version() -> None:
    base = chunk_record(doc("バスの運賃は150円です。"))[0].chunk_id
    assert chunk_record(doc("バスの運賃は200円です。"))[0].chunk_id != base
    assert chunk_record(doc("バスの運賃は150円です。", version="2"))[0].chunk_id != base
    # an unchanged section keeps its id when another section changes
    a = chunk_record(doc("# A\n一つ目の文です。\n\n# B\n二つ目の文です。"))
    b = chunk_record(doc("# A\n一つ目の文です。\n\n# B\n二つ目を変えました。"))
    assert a[0].chunk_id == b[0].chunk_id
    assert a[1].chunk_id != b[1].chunk_id


def test_chunk_validity_follows_its_record() -> None:
    from datetime import date

    (chunk,) = chunk_record(doc("運賃は200円です。", valid_to=date(2026, 10, 31)))
    assert chunk.valid_on(date(2026, 10, 31))
    assert not chunk.valid_on(date(2026, 11, 1))


# --- the store -----------------------------------------------------------------------


def test_load_writes_sorted_records_and_manifest(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "campaign")
    assert not store.exists() and store.digest() is None and store.records() == []
    report = store.load([doc("b の本文です。", id="b"), doc("a の本文です。", id="a")])
    assert (report.added, report.updated, report.unchanged, report.total) == (2, 0, 0, 2)
    assert store.exists()
    lines = store.records_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b"]
    manifest = json.loads(store.manifest_path.read_text(encoding="utf-8"))
    assert manifest["digest"] == report.digest == store.digest()
    assert manifest["records"] == 2
    assert [r.id for r in store.records()] == ["a", "b"]


def test_second_load_of_the_same_input_changes_nothing(tmp_path: Path) -> None:
    import kotae.samples

    records = load_records(Path(kotae.samples.__file__).parent / "kb")
    store = KnowledgeStore(tmp_path, "default")
    first = store.load(records)
    before_bytes = store.records_path.read_bytes()
    before_manifest = store.manifest_path.read_bytes()
    before_stat = store.records_path.stat()

    again = KnowledgeStore(tmp_path, "default").load(load_records(Path(kotae.samples.__file__).parent / "kb"))

    assert (again.added, again.updated, again.unchanged) == (0, 0, len(records))
    assert again.digest == first.digest == store.digest()
    assert store.records_path.read_bytes() == before_bytes
    assert store.manifest_path.read_bytes() == before_manifest  # not even updated_at moved
    after_stat = store.records_path.stat()
    assert (after_stat.st_ino, after_stat.st_mtime_ns) == (before_stat.st_ino, before_stat.st_mtime_ns)


def test_load_upserts_by_id(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "default")
    store.load([doc("運賃は200円です。", id="bus"), doc("保育料は無料です。", id="childcare")])
    old_digest = store.digest()

    report = store.load([doc("運賃は150円です。", id="bus", version="2"), doc("給食費は無料です。", id="lunch")])

    assert (report.added, report.updated, report.unchanged, report.total) == (1, 1, 0, 3)
    assert report.digest != old_digest
    assert store.digest() == report.digest
    by_id = {r.id: r for r in store.records()}
    assert set(by_id) == {"bus", "childcare", "lunch"}  # records not in the input are kept
    assert by_id["bus"].text == "運賃は150円です。" and by_id["bus"].version == "2"
    assert [c.text for c in store.chunks() if c.doc_id == "bus"] == ["運賃は150円です。"]


def test_load_report_counts_docs_faq_and_chunks(tmp_path: Path) -> None:
    store = KnowledgeStore(tmp_path, "default")
    report = store.load(
        [
            doc("# A\n一つ目です。\n\n# B\n二つ目です。", id="d"),
            KBRecord(id="f", kind="faq", question="q?", answer="a."),
        ]
    )
    assert (report.docs, report.faq, report.chunks) == (1, 1, 3)
    assert report.as_dict()["chunks"] == 3 == len(store.chunks())


def test_knowledge_bases_are_separate(tmp_path: Path) -> None:
    KnowledgeStore(tmp_path, "one").load([doc("一つ目です。", id="x")])
    assert KnowledgeStore(tmp_path, "two").records() == []
    assert not KnowledgeStore(tmp_path, "two").exists()


@pytest.mark.parametrize("name", ["../escape", "a/b", "has space", "", "-dash-first", "x" * 65, "日本語"])
def test_bad_kb_name_is_rejected(tmp_path: Path, name: str) -> None:
    with pytest.raises(KnowledgeBaseError, match="knowledge base name"):
        KnowledgeStore(tmp_path, name)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["default", "campaign_2027", "Ch-1", "x" * 64])
def test_good_kb_names_are_accepted(tmp_path: Path, name: str) -> None:
    assert KnowledgeStore(tmp_path, name).dir == tmp_path / name


from hypothesis import (  # noqa: E402
    given,
    settings,
    strategies as st,  # noqa: E402
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=25),
    st.integers(min_value=20, max_value=200),
)
def test_chunking_keeps_every_sentence_once_and_in_order(lengths: list[int], max_chars: int) -> None:
    sentences = [f"文{i}" + "あ" * n + "です。" for i, n in enumerate(lengths)]
    chunks = chunk_record(doc("".join(sentences), lang="ja"), max_chars=max_chars)
    assert [s for c in chunks for s in split_sentences(c.text)] == sentences
    for c in chunks:
        parts = split_sentences(c.text)
        assert len(c.text) <= max_chars or len(parts) == 1  # only a lone long sentence may exceed the limit
