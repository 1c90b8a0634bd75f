"""kotae.services.retriever.logic: search a knowledge base and gate on the best hit."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

import kotae.samples
from kotae.bus.edge import TransientError
from kotae.contracts import Evidence, FaqEvidence
from kotae.knowledge.records import KBRecord, load_records
from kotae.knowledge.store import KnowledgeStore
from kotae.services.retriever.logic import KnowledgeBaseMissing, Retrieval, Retriever, ask_back
from kotae.settings import Settings, load_settings

STREAM_DAY = date(2026, 11, 30)
SAMPLE_KB = Path(kotae.samples.__file__).parent / "kb"

CRAFTED = [
    KBRecord(id="childcare", kind="doc", title="子育て支援", text="保育料は月額1万5千円を上限にします。第2子以降の保育料は無料にします。"),
    KBRecord(id="lunch", kind="doc", title="教育", text="市立小中学校の給食費を無料にします。タブレットを新しくします。"),
    KBRecord(id="disaster", kind="doc", title="防災", text="指定避難所を80か所に増やします。防災アプリを公開します。"),
    KBRecord(id="housing", kind="doc", title="住まい", text="若者に月額1万円の家賃補助を支給します。空き家を改修します。"),
    KBRecord(id="faq-lunch", kind="faq", question="給食費は無料になりますか？", answer="はい、無料になります。"),
]


@pytest.fixture
def crafted(tmp_path: Path) -> Settings:
    settings = load_settings(data_dir=tmp_path)
    KnowledgeStore(settings.kb_dir, "default").load(CRAFTED)
    return settings


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("data"))
    KnowledgeStore(settings.kb_dir, "default").load(load_records(SAMPLE_KB))
    return Retriever(settings)


# --- the gate ---------------------------------------------------------------------


def test_a_question_the_kb_answers_passes_the_answer_gate(crafted: Settings) -> None:
    result = Retriever(crafted).retrieve("保育料はいくら？", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert result.top_score == pytest.approx(1.0)
    assert [d.doc_id for d in result.docs][:1] == ["childcare"]
    assert result.method == "bm25"


def test_a_half_matching_question_asks_back(crafted: Settings) -> None:
    result = Retriever(crafted).retrieve("防災の野球", kb="default", day=STREAM_DAY)
    assert result.gate == "clarify"
    assert crafted.gate_clarify <= result.top_score < crafted.gate_answer
    assert result.docs[0].doc_id == "disaster"
    assert result.candidates() == ["防災"]


def test_an_off_topic_question_is_no_match(crafted: Settings) -> None:
    result = Retriever(crafted).retrieve("明日の天気どうなるんだろ", kb="default", day=STREAM_DAY)
    assert result.gate == "no_match"
    assert result.top_score == 0.0
    assert result.docs == [] and result.faq == []


def test_a_weak_partial_match_is_no_match_even_with_hits(crafted: Settings) -> None:
    result = Retriever(crafted).retrieve("空き家の天気予報", kb="default", day=STREAM_DAY)
    assert result.gate == "no_match"
    assert 0.0 < result.top_score < crafted.gate_clarify


def test_gate_thresholds_come_from_settings(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, gate_answer=0.3, gate_clarify=0.1)
    KnowledgeStore(settings.kb_dir, "default").load(CRAFTED)
    assert Retriever(settings).retrieve("防災の野球", kb="default", day=STREAM_DAY).gate == "answer"
    assert Retriever(settings).retrieve("空き家の天気予報", kb="default", day=STREAM_DAY).gate == "clarify"


def test_faq_is_searched_separately_and_counts_for_the_gate(crafted: Settings) -> None:
    result = Retriever(crafted).retrieve("給食費は無料？", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert [f.faq_id for f in result.faq] == ["faq-lunch"]
    assert all(d.doc_id != "faq-lunch" for d in result.docs)
    assert result.faq[0].question == "給食費は無料になりますか？" and result.faq[0].answer == "はい、無料になります。"


def test_top_k_and_top_faq_limit_the_evidence(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, top_k=1, top_faq=0)
    KnowledgeStore(settings.kb_dir, "default").load(CRAFTED)
    result = Retriever(settings).retrieve("無料の月額", kb="default", day=STREAM_DAY)
    assert len(result.docs) == 1
    assert result.faq == []


def test_one_document_appears_once_even_with_several_matching_chunks(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path)
    long = "# 保育料\n" + "".join(f"保育料の説明その{i}です。" for i in range(40)) + "\n# 保育所\n保育所を増やします。"
    KnowledgeStore(settings.kb_dir, "default").load([KBRecord(id="big", kind="doc", text=long), *CRAFTED])
    result = Retriever(settings).retrieve("保育料", kb="default", day=STREAM_DAY)
    ids = [d.doc_id for d in result.docs]
    assert ids.count("big") == 1


# --- knowledge base lifecycle ---------------------------------------------------------------


def test_missing_knowledge_base_names_it(tmp_path: Path) -> None:
    retriever = Retriever(load_settings(data_dir=tmp_path))
    with pytest.raises(KnowledgeBaseMissing) as err:
        retriever.retrieve("保育料はいくら？", kb="campaign-2027", day=STREAM_DAY)
    assert "campaign-2027" in str(err.value)
    assert isinstance(err.value, TransientError)  # retried: the KB may be loaded soon


def test_a_reload_takes_effect_without_a_new_retriever(crafted: Settings) -> None:
    retriever = Retriever(crafted)
    assert retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY).gate == "no_match"
    KnowledgeStore(crafted.kb_dir, "default").load(
        [KBRecord(id="pets", kind="doc", title="動物", text="ペットの殺処分ゼロを目指します。")]
    )
    result = retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert result.docs[0].doc_id == "pets"


def test_knowledge_bases_do_not_mix(crafted: Settings) -> None:
    KnowledgeStore(crafted.kb_dir, "other").load(
        [KBRecord(id="pets", kind="doc", title="動物", text="ペットの殺処分ゼロを目指します。")]
    )
    retriever = Retriever(crafted)
    assert retriever.retrieve("ペットの殺処分ゼロ", kb="default", day=STREAM_DAY).docs == []
    assert [d.doc_id for d in retriever.retrieve("ペットの殺処分ゼロ", kb="other", day=STREAM_DAY).docs] == ["pets"]


# --- the bundled sample ------------------------------------------------------------------


def test_sample_childcare_fee_question_is_answered_from_the_childcare_doc(sample: Retriever) -> None:
    result = sample.retrieve("保育料っていくらになるの", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    top = result.docs[0]
    assert top.doc_id == "childcare-2027"
    assert top.slide == 4 and top.source == "政策集2027 p.4" and top.lang == "ja"
    assert "1万5千円" in top.text
    assert "faq-childcare-fee" in [f.faq_id for f in result.faq]


def test_superseded_fare_is_not_returned_after_its_valid_to(sample: Retriever) -> None:
    result = sample.retrieve("バスの運賃はいくら", kb="default", day=STREAM_DAY)
    ids = [d.doc_id for d in result.docs]
    assert ids[0] == "bus-fare-2027"
    assert "bus-fare-2026" not in ids
    assert "150円" in result.docs[0].text
    assert result.docs[0].valid_from == date(2026, 11, 1) and result.docs[0].version == "2027.1"


def test_superseded_fare_is_still_returned_while_it_was_valid(sample: Retriever) -> None:
    ids = [d.doc_id for d in sample.retrieve("バスの運賃はいくら", kb="default", day=date(2026, 6, 1)).docs]
    assert ids[0] == "bus-fare-2026"
    assert "bus-fare-2027" not in ids


def test_sample_english_question(sample: Retriever) -> None:
    result = sample.retrieve("What time do the polls close on election day?", kb="default", day=STREAM_DAY)
    assert result.gate == "answer"
    assert result.docs[0].doc_id == "how-to-vote-2027-en"
    assert result.faq[0].faq_id == "faq-polling-hours-en"


@pytest.mark.parametrize("text", ["みらいさんの好きな食べ物は？", "明日の天気どうなるんだろ", "こんばんは〜"])
def test_sample_off_topic_comments_are_no_match(sample: Retriever, text: str) -> None:
    assert sample.retrieve(text, kb="default", day=STREAM_DAY).gate == "no_match"


@pytest.mark.xfail(
    reason="text.py _japanese_tokens: compounds are split only by Sudachi mode A, which keeps "
    "コミュニティバス whole, so 'バス代' never meets the bus documents; the sample's answerable c007 "
    "asks back with an unrelated FAQ instead",
    strict=True,
)
def test_sample_bus_money_question_finds_the_current_fare(sample: Retriever) -> None:
    result = sample.retrieve("バス代いくらになるんですか？🚌", kb="default", day=STREAM_DAY)
    assert "bus-fare-2027" in [d.doc_id for d in result.docs]


# --- asking back ------------------------------------------------------------------------


def ev(title: str, score: float, doc_id: str = "d") -> Evidence:
    return Evidence(doc_id=doc_id, chunk_id=f"{doc_id}#1", title=title, text="t", score=score)


def test_candidates_are_distinct_titles_close_to_the_best() -> None:
    retrieval = Retrieval(
        gate="clarify",
        top_score=0.4,
        docs=[ev("保育", 2.0), ev("保育", 1.8), ev("バス", 1.2), ev("", 1.1), ev("防災", 0.9), ev("教育", 1.0)],
    )
    assert retrieval.candidates() == ["保育", "バス", "教育"]
    assert retrieval.candidates(limit=1) == ["保育"]


def test_candidates_fall_back_to_faq_questions() -> None:
    retrieval = Retrieval(
        gate="clarify", top_score=0.4, faq=[FaqEvidence(faq_id="f", question="給食費は？", answer="無料です。", score=1.0)]
    )
    assert retrieval.candidates() == ["給食費は？"]
    assert Retrieval(gate="no_match", top_score=0.0).candidates() == []


def test_ask_back_in_japanese() -> None:
    assert ask_back(["保育料"], "ja") == "「保育料」についてのご質問でしょうか？"
    assert ask_back(["保育料", "バス運賃", "防災"], "ja") == "「保育料」、「バス運賃」、「防災」のどれについてのご質問でしょうか？"


def test_ask_back_in_english() -> None:
    assert ask_back(["Nursery fees"], "en") == 'Do you mean "Nursery fees"?'
    assert ask_back(["Nursery fees", "Bus fares"], "en") == 'Do you mean "Nursery fees" or "Bus fares"?'
    assert ask_back(["A", "B", "C"], "en") == 'Do you mean "A", "B" or "C"?'
