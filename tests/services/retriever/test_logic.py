"""kotae.services.retriever.logic: hybrid search over a knowledge base in Qdrant, and the gate.

Knowledge bases are indexed the way ``kotae kb load`` does it
(:func:`load_knowledge_base`). The bundled sample is indexed once per module;
the USE embedder is loaded once per process and memoises vectors, so the small
crafted knowledge bases of single tests are cheap to index.
"""

from __future__ import annotations

import json
import tempfile
from datetime import date
from pathlib import Path

import pytest

import kotae.samples
from kotae.faults import TransientError
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import KBRecord, load_records
from kotae.knowledge.store import KnowledgeStore, chunk_record
from kotae.services.retriever.logic import (
    CLOSE_SIBLING,
    MAX_CHUNKS_PER_DOCUMENT,
    METHOD,
    IndexModelMismatch,
    KnowledgeBaseMissing,
    Retrieval,
    Retriever,
    ask_back,
)
from kotae.settings import Settings, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant")

STREAM_DAY = date(2026, 11, 30)  # bus-fare-2027 is in force, bus-fare-2026 has expired
BEFORE_CHANGE = date(2026, 6, 1)  # bus-fare-2026 is in force, bus-fare-2027 not yet
SAMPLES = Path(kotae.samples.__file__).parent
SAMPLE_KB = SAMPLES / "kb"
QUESTIONS = [
    json.loads(line) for line in (SAMPLES / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
]
ANSWERABLE = [q for q in QUESTIONS if q["kind"] == "answerable"]
OFFTOPIC = [q for q in QUESTIONS if q["kind"] == "offtopic"]

BUS_FARE_Q = "みなとループの大人の運賃は1回いくら？"

PETS = KBRecord(
    id="pets",
    kind="doc",
    title="動物愛護",
    text="ペットの殺処分ゼロを目指します。保護犬と保護猫の譲渡会を毎月開きます。",
)
CHILDCARE = KBRecord(
    id="childcare",
    kind="doc",
    title="子育て支援",
    text="保育料は月額1万5千円を上限にします。第2子以降の保育料は無料にします。",
)
LUNCH = KBRecord(
    id="lunch", kind="doc", title="教育", text="市立小中学校の給食費を無料にします。タブレットを新しくします。"
)


def retrieve_once(records: list[KBRecord], text: str, settings: Settings) -> Retrieval:
    """Index ``records`` as the default knowledge base and retrieve ``text`` once."""
    index(records, "default", settings)
    retriever = Retriever(settings)
    try:
        return retriever.retrieve(text, kb="default", day=STREAM_DAY)
    finally:
        retriever.close()


def ids(result: Retrieval) -> list[str]:
    return [d.doc_id for d in result.docs]


def index(records: list[KBRecord], name: str, settings: Settings) -> dict:
    return load_knowledge_base(records, name, settings)


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data dir with the bundled sample indexed as 'default' (once for the module)."""
    settings = load_settings(data_dir=tmp_path_factory.mktemp("sample"))
    index(load_records(SAMPLE_KB), "default", settings)
    return settings


@pytest.fixture(scope="module")
def sample(sample_settings: Settings) -> Retriever:
    retriever = Retriever(sample_settings)
    yield retriever
    retriever.close()


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where this test's retrievers put their private copies of a shard (tempfile.mkdtemp)."""
    where = tmp_path / "private"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


# --- the right document first ------------------------------------------------------------


def test_childcare_fee_question_finds_the_childcare_policy_first(sample: Retriever) -> None:
    result = sample.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY)
    assert result.method == METHOD == "hybrid"
    assert result.kb == "default"
    top = result.docs[0]
    assert top.doc_id == "childcare-2027"
    assert (top.slide, top.source, top.lang) == (4, "政策集2027 p.4", "ja")
    assert "1万5千円" in top.text
    assert top.score > 0
    assert result.faq[0].faq_id == "faq-childcare-fee"
    assert result.faq[0].question == "保育料はいくらになりますか？"


def test_after_the_fare_change_only_the_new_fare_is_found(sample: Retriever) -> None:
    result = sample.retrieve(BUS_FARE_Q, kb="default", day=STREAM_DAY)
    assert ids(result)[0] == "bus-fare-2027"
    assert "bus-fare-2026" not in ids(result)
    top = result.docs[0]
    assert "150円" in top.text
    assert top.valid_from == date(2026, 11, 1) and top.valid_to is None and top.version == "2027.1"


def test_before_the_fare_change_only_the_old_fare_is_found(sample: Retriever) -> None:
    result = sample.retrieve(BUS_FARE_Q, kb="default", day=BEFORE_CHANGE)
    assert ids(result)[0] == "bus-fare-2026"
    assert "bus-fare-2027" not in ids(result)
    assert "200円" in result.docs[0].text
    assert result.docs[0].valid_to == date(2026, 10, 31)


@pytest.mark.parametrize(
    ("day", "present", "absent"),
    [
        pytest.param(date(2026, 10, 31), "bus-fare-2026", "bus-fare-2027", id="last-day-of-old-fare"),
        pytest.param(date(2026, 11, 1), "bus-fare-2027", "bus-fare-2026", id="first-day-of-new-fare"),
    ],
)
def test_validity_bounds_are_inclusive(sample: Retriever, day: date, present: str, absent: str) -> None:
    found = ids(sample.retrieve(BUS_FARE_Q, kb="default", day=day))
    assert found[0] == present
    assert absent not in found


def test_bus_money_question_meets_community_bus_through_character_ngrams(sample: Retriever) -> None:
    # Sudachi keeps コミュニティバス whole, so the words field never meets バス代; the
    # character bigram バス does.
    result = sample.retrieve("バス代いくらになるんですか？", kb="default", day=STREAM_DAY)
    assert "bus-fare-2027" in ids(result)
    assert ids(result)[0] == "bus-fare-2027"
    assert result.gate in ("answer", "clarify")


def test_english_question_finds_the_english_document_and_faq(sample: Retriever) -> None:
    result = sample.retrieve("What time do the polls close on election day?", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert result.docs[0].doc_id == "how-to-vote-2027-en"
    assert result.faq[0].faq_id == "faq-polling-hours-en"


def test_expected_evidence_is_found_for_answerable_sample_questions(sample: Retriever) -> None:
    found = 0
    for q in ANSWERABLE:
        result = sample.retrieve(q["text"], kb="default", day=STREAM_DAY)
        got = set(ids(result)) | {f.faq_id for f in result.faq}
        found += bool(set(q["expected_doc_ids"]) & got)
    assert found / len(ANSWERABLE) >= 0.9, f"{found}/{len(ANSWERABLE)}"


# --- the gate on the sample, default thresholds ----------------------------------------------


def test_default_thresholds(sample_settings: Settings) -> None:
    assert (sample_settings.gate_answer, sample_settings.gate_clarify, sample_settings.gate_strong) == (
        0.35,
        0.20,
        0.60,
    )


def test_a_clear_question_is_answered(sample: Retriever) -> None:
    result = sample.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert result.top_score >= 0.35


@pytest.mark.parametrize(
    "text",
    ["今日の天気は？", "こんにちは", "草", "明日の天気どうなるんだろ", "みらいさんの好きな食べ物は？", "こんばんは〜"],
)
def test_off_topic_chat_is_no_match(sample: Retriever, text: str) -> None:
    result = sample.retrieve(text, kb="default", day=STREAM_DAY)
    assert result.gate == "no_match"
    assert result.top_score < 0.20


def test_a_keyword_question_of_one_covered_topic_is_answered_from_it(sample: Retriever) -> None:
    # バス代 is in no record (the policy says 運賃), but バス is, and only one topic holds it.
    result = sample.retrieve("バス代いくらになるんですか？", kb="default", day=STREAM_DAY)
    assert result.gate == "answer", result.reason
    assert result.docs[0].title == "公共交通：コミュニティバス運賃と新路線"


def test_nine_in_ten_answerable_sample_questions_pass_the_gate(sample: Retriever) -> None:
    gates = {q["id"]: sample.retrieve(q["text"], kb="default", day=STREAM_DAY).gate for q in ANSWERABLE}
    passed = [qid for qid, gate in gates.items() if gate in ("answer", "clarify")]
    assert len(ANSWERABLE) >= 20
    assert len(passed) / len(ANSWERABLE) >= 0.9, {k: v for k, v in gates.items() if k not in passed}


def test_off_topic_sample_questions_are_no_match(sample: Retriever) -> None:
    gates = {q["text"]: sample.retrieve(q["text"], kb="default", day=STREAM_DAY).gate for q in OFFTOPIC}
    assert OFFTOPIC and all(g == "no_match" for g in gates.values()), gates


def test_thresholds_come_from_settings(sample_settings: Settings) -> None:
    lenient = Retriever(sample_settings.model_copy(update={"gate_answer": 0.2, "gate_clarify": 0.0}))
    strict = Retriever(sample_settings.model_copy(update={"gate_answer": 0.99, "gate_clarify": 0.95}))
    try:
        assert lenient.retrieve("バス代いくらになるんですか？", kb="default", day=STREAM_DAY).gate == "answer"
        assert strict.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY).gate == "no_match"
        assert strict.retrieve("バス代いくらになるんですか？", kb="default", day=STREAM_DAY).gate == "no_match"
    finally:
        lenient.close()
        strict.close()


# --- limits -------------------------------------------------------------------------------


def test_top_k_and_top_faq_limit_the_evidence(sample_settings: Settings) -> None:
    query = "保育料っていくらになるの"
    few = Retriever(sample_settings.model_copy(update={"top_k": 2, "top_faq": 1}))
    no_faq = Retriever(sample_settings.model_copy(update={"top_k": 1, "top_faq": 0}))
    try:
        result = few.retrieve(query, kb="default", day=STREAM_DAY)
        assert len(result.docs) == 2 and len(result.faq) == 1
        assert result.docs[0].doc_id == "childcare-2027"
        result = no_faq.retrieve(query, kb="default", day=STREAM_DAY)
        assert ids(result) == ["childcare-2027"]
        assert result.faq == []
    finally:
        few.close()
        no_faq.close()


def test_default_limits_on_the_sample(sample: Retriever, sample_settings: Settings) -> None:
    result = sample.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY)
    assert len(result.docs) == sample_settings.top_k == 8
    assert len(result.faq) == sample_settings.top_faq == 3
    assert not any(d.doc_id.startswith("faq-") for d in result.docs)


def test_a_document_gives_a_second_chunk_only_when_it_scores_as_well_as_its_best(sample: Retriever) -> None:
    for q in QUESTIONS:
        docs = sample.retrieve(q["text"], kb="default", day=STREAM_DAY).docs
        for doc_id in {d.doc_id for d in docs}:
            scores = [d.score for d in docs if d.doc_id == doc_id]
            assert len(scores) <= MAX_CHUNKS_PER_DOCUMENT, q["text"]
            assert all(s >= CLOSE_SIBLING * scores[0] - 1e-4 for s in scores[1:]), (q["text"], doc_id, scores)


def test_the_section_that_holds_the_answer_is_kept_beside_the_best_scoring_one(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    # The rules section names the campaign's prizes and its A prize as often as the prize list does.
    rules = "".join(f"キャンペーンの賞品の注意その{i}：A賞の当選は1人1回まで。" for i in range(8))
    prizes = "".join(f"キャンペーンの賞品その{i}：A賞はアクリルスタンド。" for i in range(8)) + "B賞は目覚まし時計。"
    campaign = KBRecord(
        id="campaign", kind="doc", title="キャンペーン応募要項", text=f"# 注意事項\n{rules}\n# 賞品\n{prizes}"
    )
    assert len(chunk_record(campaign)) == 2
    result = retrieve_once([campaign, CHILDCARE, LUNCH], "キャンペーンのB賞の賞品は何ですか", settings)
    assert ids(result)[:2] == ["campaign", "campaign"]
    assert any("B賞は目覚まし時計" in d.text for d in result.docs[:2])


def test_one_document_does_not_crowd_out_the_others_with_its_many_matching_chunks(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    long = "# 保育料\n" + "".join(f"保育料の説明その{i}です。" for i in range(40)) + "\n# 保育所\n保育所を増やします。"
    big = KBRecord(id="big", kind="doc", title="保育料のすべて", text=long)
    assert len(chunk_record(big)) > 2
    result = retrieve_once([big, CHILDCARE, LUNCH], "保育料", settings)
    assert ids(result).count("big") <= MAX_CHUNKS_PER_DOCUMENT
    assert {"childcare", "lunch"} <= set(ids(result))  # the other documents are not crowded out


# --- knowledge bases: reload, isolation, missing, model ---------------------------------------


def test_a_reload_takes_effect_in_a_running_retriever(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    index([CHILDCARE, LUNCH], "default", settings)
    retriever = Retriever(settings)
    try:
        before = retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY)
        assert before.gate == "no_match"
        assert "pets" not in ids(before)
        report = index([PETS], "default", settings)
        assert report["index"]["rebuilt"] is True
        after = retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY)
        assert after.gate == "answer"
        assert ids(after)[0] == "pets"
        # an edited record replaces its old text
        index([PETS.model_copy(update={"text": "保護犬の譲渡会を毎週開きます。", "version": "2"})], "default", settings)
        edited = retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY)
        pets = [d for d in edited.docs if d.doc_id == "pets"]
        assert len(pets) == 1 and "毎週" in pets[0].text and pets[0].version == "2"
    finally:
        retriever.close()


def test_two_knowledge_bases_never_mix(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    index([PETS], "a", settings)
    index([CHILDCARE, LUNCH], "b", settings)
    retriever = Retriever(settings)
    try:
        for query in ("ペットの殺処分ゼロ", "保育料はいくら？", "給食費"):
            a = retriever.retrieve(query, kb="a", day=STREAM_DAY)
            b = retriever.retrieve(query, kb="b", day=STREAM_DAY)
            assert set(ids(a)) <= {"pets"} and a.kb == "a"
            assert set(ids(b)) <= {"childcare", "lunch"} and b.kb == "b"
        assert ids(retriever.retrieve("ペットの殺処分ゼロ", kb="a", day=STREAM_DAY)) == ["pets"]
        assert retriever.retrieve("ペットの殺処分ゼロ", kb="b", day=STREAM_DAY).gate == "no_match"
        assert ids(retriever.retrieve("保育料はいくら？", kb="b", day=STREAM_DAY))[0] == "childcare"
    finally:
        retriever.close()


def test_missing_knowledge_base_is_transient_and_named(tmp_path: Path) -> None:
    retriever = Retriever(load_settings(data_dir=tmp_path))
    with pytest.raises(KnowledgeBaseMissing) as err:
        retriever.retrieve("保育料はいくら？", kb="campaign-2027", day=STREAM_DAY)
    assert "campaign-2027" in str(err.value)
    assert isinstance(err.value, TransientError)  # retried: the knowledge base may be loaded soon


def test_stored_but_never_indexed_knowledge_base_is_missing(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    KnowledgeStore(settings.kb_dir, "stored-only").load([CHILDCARE])  # records, no index
    with pytest.raises(KnowledgeBaseMissing, match="stored-only"):
        Retriever(settings).retrieve("保育料はいくら？", kb="stored-only", day=STREAM_DAY)


def test_index_of_another_embedding_model_is_refused_before_any_call(
    sample_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(
        data_dir=sample_settings.data_dir, embedding_model="openai:text-embedding-3-small", openai_api_key="x"
    )
    retriever = Retriever(settings)

    def no_call(*args: object, **kwargs: object) -> None:
        raise AssertionError("the query was embedded by a model the index was not built with")

    monkeypatch.setattr(retriever.embedder, "embed", no_call)
    with pytest.raises(IndexModelMismatch) as err:
        retriever.retrieve("保育料はいくら？", kb="default", day=STREAM_DAY)
    message = str(err.value)
    assert "use-multilingual-v3" in message and "openai:text-embedding-3-small" in message
    assert isinstance(err.value, TransientError)


def test_server_backend_retriever_keeps_knowledge_bases_apart(tmp_path: Path) -> None:
    """KOTAE_QDRANT_URL as a path: qdrant-client's local mode, one collection for every knowledge base."""
    settings = load_settings(data_dir=tmp_path / "data", qdrant_url=str(tmp_path / "qdrant"))
    index([PETS], "a", settings)
    index([CHILDCARE, LUNCH], "b", settings)
    assert not (settings.kb_dir / "a" / "index.json").exists()  # nothing embedded was built
    retriever = Retriever(settings)  # after the loads: local mode allows one client per folder
    try:
        a = retriever.retrieve("ペットの殺処分ゼロ", kb="a", day=STREAM_DAY)
        assert (a.gate, ids(a)) == ("answer", ["pets"])
        b = retriever.retrieve("保育料はいくら？", kb="b", day=STREAM_DAY)
        assert ids(b)[0] == "childcare" and set(ids(b)) <= {"childcare", "lunch"}
        assert retriever.retrieve("ペットの殺処分ゼロ", kb="b", day=STREAM_DAY).gate == "no_match"
        with pytest.raises(KnowledgeBaseMissing, match="'nope'"):
            retriever.retrieve("保育料", kb="nope", day=STREAM_DAY)
    finally:
        retriever.close()


def test_private_shard_copies_are_removed_when_replaced_or_closed(tmp_path: Path, private_tmp: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    index([CHILDCARE], "default", settings)
    retriever = Retriever(settings)
    retriever.retrieve("保育料", kb="default", day=STREAM_DAY)
    index([PETS], "default", settings)
    retriever.retrieve("保育料", kb="default", day=STREAM_DAY)
    # The replaced copy is closed after a grace period (searches on other threads may
    # still use it): at most the old and the new copy exist meanwhile.
    assert len(list(private_tmp.iterdir())) <= 2
    retriever.close()
    assert list(private_tmp.iterdir()) == []


# --- asking back ----------------------------------------------------------------------------


def test_ask_back_in_japanese() -> None:
    assert ask_back(["保育料"], "ja") == "「保育料」についてのご質問でしょうか？"
    assert (
        ask_back(["保育料", "バス運賃", "防災"], "ja")
        == "「保育料」、「バス運賃」、「防災」のどれについてのご質問でしょうか？"
    )


def test_ask_back_in_english() -> None:
    assert ask_back(["Nursery fees"], "en") == 'Do you mean "Nursery fees"?'
    assert ask_back(["Nursery fees", "Bus fares"], "en") == 'Do you mean "Nursery fees" or "Bus fares"?'
    assert ask_back(["A", "B", "C"], "en") == 'Do you mean "A", "B" or "C"?'


# --- ranking without the dense search -----------------------------------------------------------


def test_ranked_by_words_and_characters_alone_the_gate_still_sees_the_cosine(sample_settings: Settings) -> None:
    """KOTAE_FUSION_DENSE=0 drops the dense search, not the embedding similarity the gate weighs."""
    lexical = Retriever(sample_settings.model_copy(update={"fusion_dense": 0.0}))
    try:
        answered = [lexical.retrieve(q["text"], kb="default", day=STREAM_DAY).gate for q in ANSWERABLE]
        assert sum(g in ("answer", "clarify") for g in answered) / len(ANSWERABLE) >= 0.9
        assert all(lexical.retrieve(q["text"], kb="default", day=STREAM_DAY).gate == "no_match" for q in OFFTOPIC)
        result = lexical.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY)
        assert result.gate == "answer" and result.docs[0].doc_id == "childcare-2027"
        hit = lexical.searcher("default").search_many(
            "保育料っていくらになるの", kinds=("doc",), day=STREAM_DAY, top_k=1
        )["doc"][0]
        assert 0.0 < hit.signals["dense"] <= 1.0
    finally:
        lexical.close()


def test_a_kana_word_typed_with_a_slip_is_searched_as_the_records_word_and_the_reason_says_so(
    tmp_path: Path,
) -> None:
    battery = KBRecord(id="battery", kind="doc", title="電池", text="バッテリーは約2年で交換します。交換は無料です。")
    result = retrieve_once([battery, PETS, CHILDCARE], "ハッテリーって何年もつ?", load_settings(data_dir=tmp_path))
    assert ids(result)[0] == "battery"
    assert "read 「ハッテリー」 as 「バッテリー」" in result.reason
