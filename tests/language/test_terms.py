"""kotae.language.terms: what a comment names, and whether the records have it under any spelling."""

from __future__ import annotations

import pytest

from kotae.language.terms import Vocabulary, key_terms

RECORDS = [
    "観光：宿泊税を1泊200円で導入します。",
    "交通：コミュニティバスと臨海鉄道の運賃の上限を300円にします。",
    "高齢者：補聴器の購入を助成します。介護職員の給与に手当を上乗せします。",
    "農業：新規就農者に30万円を上乗せします。賞味期限の表示を見直します。",
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.of(RECORDS)


def terms(text: str) -> dict[str, bool]:
    return {t.surface: t.specific for t in key_terms(text)}


def test_key_terms_are_the_nouns_a_comment_names_without_question_words() -> None:
    assert terms("消費税は下げてくれるの？") == {"消費税": True}  # a compound: specific
    assert terms("何党？") == {}  # a question word is not a topic
    assert terms("海野さんの出身地はどこですか")["海野"] is True  # a proper noun
    assert terms("母が耳遠くなってきてて") == {"母": False}  # an everyday word is not specific
    assert terms("お店が閉まった") == {"お店": False}  # the honorific お makes no compound


def test_english_names_are_specific_but_not_a_sentence_initial_capital() -> None:
    assert terms("Does Osaka get the lodging tax?") == {"osaka": True, "lodging": False, "tax": False}
    assert terms("Amazonのプライム会員")["amazon"] is True  # in a Japanese comment any capital names
    # A possessive names the same thing (a record says Osaka, not Osaka's); a contraction is no term.
    assert terms("What's Osaka's lodging tax?") == {"osaka": True, "lodging": False, "tax": False}


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("宿泊税", "word"),
        ("バス", "part"),  # inside コミュニティバス, which Sudachi keeps whole
        ("臨界鉄道", "reading"),  # 臨界 sounds like the records' 臨海
        ("給料", "synonym"),  # the records say 給与
        ("バス代", "stem"),  # バス + the suffix 代: the records have バス
    ],
)
def test_a_term_is_present_under_any_spelling(vocab: Vocabulary, text: str, how: str) -> None:
    term = next(t for t in key_terms(text) if t.surface in text)
    assert vocab.find(term) == how


def test_a_term_no_record_has_is_none(vocab: Vocabulary) -> None:
    [term] = key_terms("消費税")
    assert vocab.find(term) is None
    # A proper noun is one name: its parts in the records do not make it theirs.
    [name] = [t for t in key_terms("コンゴ共和国の首都") if t.specific]
    assert Vocabulary.of(["コンゴ川の話。共和制の話。"]).find(name) is None


@pytest.mark.parametrize(
    ("comment", "rewritten"),
    [
        ("ほちょうき", "補聴器"),
        ("しんきしゅうのう", "新規就農"),
        ("どんぐりサブレの賞味機嫌", "どんぐりサブレの賞味期限"),  # 機嫌 and 期限 share no character, but form 賞味期限
        ("介護の人の給料", "介護の人の給与"),
    ],
)
def test_a_comment_is_rewritten_in_the_records_words(vocab: Vocabulary, comment: str, rewritten: str) -> None:
    assert vocab.rewrite(comment) == rewritten


def test_kana_that_is_grammar_and_a_homophone_without_evidence_are_left_alone() -> None:
    vocab = Vocabulary.of(["動画の視聴回数を公開します。コレラの流行。市内の全店舗。"])
    assert vocab.rewrite("大阪の市長は誰") == "大阪の市長は誰"  # 市長 and 視聴 are both シチョウ
    assert vocab.rewrite("ぜんぜん") == "ぜんぜん"  # not 全 + 全
    assert vocab.rewrite("これら3つの説") == "これら3つの説"  # a pronoun, not the disease コレラ
    assert vocab.rewrite("突入しない") == "突入しない"  # kana against a kanji: an inflection, not 市内


def test_the_vocabulary_survives_the_index_meta(vocab: Vocabulary) -> None:
    again = Vocabulary.from_dict(vocab.as_dict())
    assert again.words == vocab.words and again.by_reading == vocab.by_reading and again.by_synonym == vocab.by_synonym
    assert again.rewrite("ほちょうき") == "補聴器"


def test_records_count_as_english_only_when_they_hold_english(vocab: Vocabulary) -> None:
    [osaka] = [t for t in key_terms("Will Osaka get it?") if t.specific]
    assert not vocab.writes(osaka)  # Japanese records: Osaka would be written 大阪
    english = Vocabulary.of(
        [
            "A lodging tax of 200 yen per night will fund tourist information centres across the prefecture.",
            "The fare on every route bus will be capped at 300 yen a ride, starting next October.",
        ]
    )
    assert english.writes(osaka) and english.find(osaka) is None
    [tax] = [t for t in key_terms("消費税") if t.specific]
    assert not english.writes(tax)  # English records write "consumption tax", if anything


@pytest.mark.parametrize(
    "comment", ["期日前投票所は市役所のほかにどこにありますか", "現金以外で払える？", "土日を除いて毎日やってる？"]
)
def test_what_a_comment_sets_aside_is_not_a_term_it_needs(comment: str) -> None:
    """A records' silence on 市役所 does not make 'where else besides the city hall?' uncovered."""
    assert not {"市役所", "現金", "土日"} & {t.surface for t in key_terms(comment)}


def test_a_kana_word_typed_with_a_slip_is_searched_as_the_records_word_and_named() -> None:
    vocab = Vocabulary.of(["交換の目安は約3か月。バッテリーは約2年で交換する。"])
    assert vocab.rewrite("ハッテリーどのくらいもつ?").startswith("バッテリー")
    assert vocab.slips("ハッテリーどのくらいもつ?") == [("ハッテリー", "バッテリー")]
    typed = next(t for t in key_terms("ハッテリーの交換") if t.surface == "ハッテリー")
    assert vocab.find(typed) == "slip"


def test_a_kana_word_that_is_another_word_is_not_read_as_a_slip() -> None:
    vocab = Vocabulary.of(["ゲームスの新作を発表した。"])
    assert vocab.slips("ゲームパスに来る予定ある?") == []
    assert "ゲームパス" in vocab.rewrite("ゲームパスに来る予定ある?")
