"""kotae.services.retriever.gate: covered or not, answer, ask back between covered topics, or stay silent.

Each failure class of a live chat, in Japanese and in English, over small knowledge bases
indexed as ``kotae kb load`` does it (embedded default, USE embeddings).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from kotae.knowledge.index import Hit, IndexMeta
from kotae.knowledge.loading import load_knowledge_base
from kotae.knowledge.records import KBRecord
from kotae.services.retriever.gate import Thresholds, decide, hit_score, plausible
from kotae.services.retriever.gate_model import GateModel
from kotae.services.retriever.logic import Retriever
from kotae.settings import load_settings

DAY = date(2026, 12, 1)


def doc(id: str, title: str, text: str, lang: str = "ja") -> KBRecord:
    return KBRecord(id=id, kind="doc", title=title, text=text, lang=lang)


CAMPAIGN = [
    doc("tourism", "観光：宿泊税と周遊", "宿泊税を1泊200円で導入します。観光案内所を駅前に置きます。"),
    doc("bus", "交通：路線バス", "路線バスの運賃の上限を300円にします。臨海鉄道に3億円を支援します。"),
    doc("ferry", "交通：離島フェリー", "離島フェリーの運賃を島民は半額にします。港の待合室を新しくします。"),
    doc(
        "care", "高齢者：補聴器と介護", "補聴器の購入に3万円を助成します。介護職員の給与に月2万円の手当を上乗せします。"
    ),
    doc("childcare", "子育て：保育料", "保育料は月1万5千円を上限にします。病児保育の施設を24か所に増やします。"),
]
ENGLISH = [
    doc("en-tax", "Lodging tax", "A lodging tax of 200 yen per night will fund the tourist information centres.", "en"),
    doc("en-bus", "Bus fares", "The fare on every route bus will be capped at 300 yen a ride.", "en"),
    doc("en-ferry", "Ferry fares", "Islanders will pay half the ferry fare to the mainland.", "en"),
    doc("en-care", "Hearing aids", "Buying a hearing aid will be subsidised with 30,000 yen.", "en"),
]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("gate"))
    load_knowledge_base(CAMPAIGN, "ja", settings)
    load_knowledge_base(ENGLISH, "en", settings)
    r = Retriever(settings)
    yield r
    r.close()


# --- not covered: the focus is in no record ---------------------------------------------------


@pytest.mark.parametrize(
    ("kb", "text", "missing"),
    [
        ("ja", "消費税は下げてくれるの？", "消費税"),  # the records have 宿泊税, never 消費税
        ("ja", "タクシーの初乗り運賃っていくら？", "初乗り運賃"),  # 運賃 is there, for buses and ferries
        ("en", "Does Osaka get the lodging tax too?", "osaka"),
    ],
)
def test_a_focus_no_record_has_is_left_unanswered_with_a_reason_naming_it(
    retriever: Retriever, kb: str, text: str, missing: str
) -> None:
    result = retriever.retrieve(text, kb=kb, day=DAY)
    assert result.gate == "no_match"
    assert result.missing == [missing]
    assert result.reason == f"not_covered: 「{missing}」 is in no record of the knowledge base"


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("profile"))
    records = [
        doc(
            "profile",
            "候補者プロフィール 海野あかり",
            "海野あかりは磯辺町生まれの47歳。救急科の医師として11年間働いた。",
        ),
        *CAMPAIGN,
    ]
    load_knowledge_base(records, "ja", settings)
    r = Retriever(settings)
    yield r
    r.close()


def test_a_noun_that_only_names_the_kind_asked_for_need_not_be_in_a_record(profile: Retriever) -> None:
    """出身地 asks for a place: the profile says 磯辺町生まれ and never 出身地, and still covers it."""
    result = profile.retrieve("海野さんの出身地はどこですか", kb="ja", day=DAY)
    assert "出身地" not in result.missing and not result.reason.startswith("not_covered"), result.reason
    # A noun that names what is asked about must still be there.
    other = profile.retrieve("海野さんの選挙区はどこですか", kb="ja", day=DAY)
    assert other.missing == ["選挙区"] and other.reason.startswith("not_covered: 「選挙区」"), other.reason


# --- ambiguous between covered topics: ask back, naming only those ----------------------------


@pytest.mark.parametrize(
    ("kb", "text", "topics"),
    [
        ("ja", "運賃はいくら？", {"交通：路線バス", "交通：離島フェリー"}),
        ("en", "How much is the fare?", {"Bus fares", "Ferry fares"}),
    ],
)
def test_a_question_two_covered_topics_answer_asks_back_naming_only_them(
    retriever: Retriever, kb: str, text: str, topics: set[str]
) -> None:
    result = retriever.retrieve(text, kb=kb, day=DAY)
    assert result.gate == "clarify", result.reason
    assert set(result.candidates) == topics  # not the childcare or the hearing-aid policy
    assert result.reason.startswith("clarify: best score ")


@pytest.mark.parametrize(
    ("kb", "text"), [("ja", "明日の天気はどうなる？"), ("en", "What's the weather like tomorrow?")]
)
def test_an_unrelated_question_is_not_asked_back(retriever: Retriever, kb: str, text: str) -> None:
    result = retriever.retrieve(text, kb=kb, day=DAY)
    assert result.gate == "no_match"
    assert result.candidates == []


# --- paraphrases and spellings reach an answer -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "searched", "top"),
    [
        ("ほちょうき", "補聴器", "care"),  # hiragana for a word the records write in kanji
        ("ﾎﾁｮｳｷの助成", "補聴器", "care"),  # half-width katakana
        ("ろせんばす", "路線バス", "bus"),  # two of the records' words, spelled in hiragana
        ("ヘルパーさんの給料安すぎじゃない？", "給与", "care"),  # a synonym of the records' word
    ],
)
def test_a_spelling_or_a_wording_of_the_viewer_is_searched_in_the_records_words(
    retriever: Retriever, text: str, searched: str, top: str
) -> None:
    result = retriever.retrieve(text, kb="ja", day=DAY)
    assert result.searched is not None and searched in result.searched
    assert result.gate == "answer", result.reason
    assert result.docs[0].doc_id == top


def test_an_english_paraphrase_reaches_its_topic(retriever: Retriever) -> None:
    result = retriever.retrieve("my mum can't hear well, any help buying a hearing aid?", kb="en", day=DAY)
    assert result.gate == "answer", result.reason
    assert result.docs[0].doc_id == "en-care"


# --- across languages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kb", "text", "top"),
    [
        ("ja", "How much is the nursery fee?", "childcare"),  # English over Japanese records
        ("en", "宿泊税は1泊いくら？", "en-tax"),  # Japanese over English records
    ],
)
def test_a_question_in_another_language_is_retrieved_and_answered(
    retriever: Retriever, kb: str, text: str, top: str
) -> None:
    result = retriever.retrieve(text, kb=kb, day=DAY)
    assert result.gate == "answer", result.reason
    assert result.docs[0].doc_id == top


# --- the parts ------------------------------------------------------------------------------------


def _meta() -> IndexMeta:
    return IndexMeta(
        kb="k", embedding_model="m", dim=3, chunks=4, digest="d", avgdl={}, df={"保育料": 1, "無料": 3}, k1=0.5, b=0.9
    )


def _hit(title: str, text: str, cosine: float, lang: str = "ja", kind: str = "doc") -> Hit:
    return Hit({"kind": kind, "title": title, "text": text, "lang": lang, "doc_id": title}, 1.0, {"dense": cosine})


def test_a_hit_scores_half_its_coverage_and_half_its_cosine_or_its_cosine_across_languages() -> None:
    meta, words = _meta(), ["保育料", "無料"]
    both = 0.5 * 1.0 + 0.5 * 0.6  # the title counts for a document: both words are covered
    assert hit_score(meta, words, "ja", _hit("保育料", "給食費は無料です。", 0.6)) == pytest.approx(both)
    covered = meta.idf("無料") / (meta.idf("保育料") + meta.idf("無料"))  # an FAQ is only its text
    faq = _hit("保育料", "給食費は無料です。", 0.6, kind="faq")
    assert hit_score(meta, words, "ja", faq) == pytest.approx(0.5 * covered + 0.3)
    assert hit_score(meta, words, "ja", _hit("Fees", "Nursery is free.", 0.6, lang="en")) == pytest.approx(0.6)
    assert hit_score(meta, words, "ja", _hit("", "天気", -0.4)) == 0.0
    assert hit_score(meta, words, "ja", None) == 0.0


def test_plausible_topics_hold_most_of_what_the_comment_says_and_no_other_language() -> None:
    meta, words = _meta(), ["保育料", "無料"]
    hits = [
        _hit("子育て", "保育料を無料にします。", 0.5),
        _hit("子育て", "保育料の上限。", 0.4),  # the same topic again
        _hit("教育", "給食費を無料にします。", 0.5),  # holds only the common word
        _hit("Childcare", "Nursery fees will be free.", 0.9, lang="en"),  # a summary, not a topic
    ]
    assert [t for t, _ in plausible(meta, words, "ja", hits, 0.2)] == ["子育て"]


def test_below_the_clarify_threshold_nothing_is_asked_back() -> None:
    meta = _meta()
    low = [_hit("子育て", "ほかの話。", 0.1), _hit("教育", "ほかの話。", 0.1)]
    decision = decide("保育料は無料？", low, [], meta, Thresholds(answer=0.35, clarify=0.2))
    assert decision.gate == "no_match" and decision.candidates == []
    assert decision.reason.startswith("no_match: best score 0.05 below 0.20")


def test_a_wh_question_only_the_best_topic_can_answer_is_answered_not_asked_back() -> None:
    # Both pages name the nursery fee; only one sentence holds it with an amount.
    fee = _hit("子育て支援", "保育料は月1万5千円を上限にします。", 0.9)
    company = _hit("会社概要", "保育料の相談は窓口で受けます。資本金は3000万円です。", 0.9)
    thresholds = Thresholds(answer=0.35, clarify=0.2, strong=0.6)
    decision = decide("保育料はいくら？", [fee, company], [], _meta(), thresholds)
    assert decision.gate == "answer" and decision.candidates == []
    assert decision.reason.endswith("the best topic holds the kind asked for")
    # Without a wh-word the kind is not asked for: the two pages are still two candidates.
    vague = decide("保育料の話", [fee, company], [], _meta(), thresholds)
    assert vague.gate == "clarify" and set(vague.candidates) == {"子育て支援", "会社概要"}


def test_a_wh_question_two_topics_can_answer_is_asked_back_naming_them() -> None:
    # 首相は誰ですか over two countries' articles: each names its prime minister.
    laos = _hit("ラオス", "ラオスの首相はソンサイ・シーパンドンである。", 0.9)
    dutch = _hit("オランダ", "オランダの首相はマルク・ルッテである。", 0.9)
    decision = decide("首相は誰ですか", [laos, dutch], [], _meta(), Thresholds(answer=0.35, clarify=0.2, strong=0.6))
    assert decision.gate == "clarify" and set(decision.candidates) == {"ラオス", "オランダ"}


def test_without_ask_backs_topics_that_match_as_well_all_go_on_to_the_reranker() -> None:
    laos = _hit("ラオス", "ラオスの首相はソンサイ・シーパンドンである。", 0.9)
    dutch = _hit("オランダ", "オランダの首相はマルク・ルッテである。", 0.9)
    for model in (None, GateModel.open_gate()):
        decision = decide(
            "首相は誰ですか", [laos, dutch], [], _meta(), Thresholds(0.35, 0.2, 0.6, ask_back=False), model
        )
        assert decision.gate == "answer" and decision.candidates == []
        assert decision.reason.endswith("2 topics match the comment about as well, the reranker chooses")


def test_a_topic_whose_sentence_holds_only_a_word_of_the_question_cannot_answer_it() -> None:
    # Asked the family bag's price: the stores page names the bag and prices another cracker; only
    # the catalogue's sentence holds the bag and a price.
    catalogue = _hit("商品と価格", "せんべいのお徳用袋は598円。", 0.9)
    stores = _hit("取扱店舗", "お徳用袋は店頭にない。手焼きせんべいは1枚120円で本店だけで買える。", 0.9)
    thresholds = Thresholds(answer=0.35, clarify=0.2, strong=0.6)
    decision = decide("せんべいのお徳用袋はいくらになりましたか", [catalogue, stores], [], _meta(), thresholds)
    assert decision.gate == "answer", decision.reason
    assert decision.reason.endswith("the best topic holds the kind asked for")
