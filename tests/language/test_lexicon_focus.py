"""The word lists of kotae.language.question_focus, each entry shown at work in question_focus.

Every case would fail with its entry taken out of its file: the sentence is chosen so that no
other entry or rule gives the same answer.
"""

from __future__ import annotations

import pytest

from kotae.language import lexicon
from kotae.language.question_focus import holds_kind, question_focus

LEXICONS = (
    "focus_asking_nouns",
    "focus_acts",
    "focus_light_predicates",
    "focus_wh_leads",
    "focus_wh_amount",
    "focus_wh_count",
    "focus_counters",
    "focus_wh_time",
    "focus_wh_place",
    "focus_wh_person",
    "focus_wh_person_en",
    "focus_wh_quantity",
    "focus_suffix_amount",
    "focus_suffix_time",
    "focus_suffix_place",
    "focus_suffix_count",
    "focus_adverbial_wh",
    "focus_en_auxiliaries",
    "focus_yes_no_endings",
    "focus_en_kind_amount",
    "focus_en_kind_time",
    "focus_en_kind_place",
    "focus_honorifics",
    "focus_fills_time_units",
    "focus_fills_time_words",
    "focus_fills_time_units_en",
    "focus_fills_time_words_en",
    "focus_fills_currencies",
    "focus_fills_currencies_en",
    "focus_fills_amount_words",
    "focus_fills_amount_words_en",
    "focus_fills_rates",
    "focus_fills_counters",
    "focus_fills_count_counters",
    "focus_fills_quantity_counters",
    "focus_fills_numbers_en",
    "focus_fills_quantity_words",
    "focus_fills_quantity_words_en",
    "focus_holds_place_suffix",
    "focus_holds_place_prepositions_en",
    "focus_holds_place_nouns_en",
    "focus_holds_person_suffix",
)


def _entries(name: str) -> list[str]:
    return list(lexicon.entries(name))


def _texts(question: str) -> list[str]:
    return [t.text for t in question_focus(question).terms]


# Where the template splits differently around the entry, a sentence of its own; 事 and 以外
# show only as a part of a compound (the parts an answer's words are matched against).
_ASKING_EXAMPLES = {"位": "位って何?", "一番": "一番って何?", "事": "その事件事はいつ?", "以外": "以外人気の駅は?"}


@pytest.mark.parametrize("entry", _entries("focus_asking_nouns"))
def test_a_noun_of_asking_is_no_term_of_the_question(entry: str) -> None:
    if entry in _ASKING_EXAMPLES:
        question = _ASKING_EXAMPLES[entry]
    else:
        question = f"What about the {entry}?" if entry.isascii() else f"{entry}はいくら?"
    terms = question_focus(question).terms
    assert entry not in [t.text for t in terms] and not [t for t in terms if entry in t.parts]


# 申し込みできる splits the act from its ending; asked apart, it stays whole.
_ACT_EXAMPLES = {"申し込み": "申し込みはどこですか", "申込み": "申込みはどこですか"}


@pytest.mark.parametrize("entry", _entries("focus_acts"))
def test_the_act_a_question_asks_about_weighs_little(entry: str) -> None:
    question = f"Where can I {entry}?" if entry.isascii() else _ACT_EXAMPLES.get(entry, f"どこで{entry}できる?")
    weights = [t.weight for t in question_focus(question).terms if t.text == entry]
    assert weights == [0.6]


_PREDICATE_EXAMPLES = {
    "教える": "先生が教えるの?",
    "知る": "みんな知ってるの?",
    "分かる": "それで分かるの?",
    "聞く": "先生に聞くの?",
    "思う": "そう思うの?",
    "欲しい": "これが欲しいの?",
    "貰う": "これを貰うの?",
    "呉れる": "それを呉れるの?",
    "下さる": "先生が下さるの?",
    "頂く": "これを頂くの?",
    "良い": "これで良いの?",
}


@pytest.mark.parametrize("entry", _entries("focus_light_predicates"))
def test_a_light_predicate_is_no_term_of_a_yes_no_question(entry: str) -> None:
    focus = question_focus(_PREDICATE_EXAMPLES[entry])
    assert focus.yes_no and not [t for t in focus.terms if t.kind == "predicate" and entry in t.forms]


@pytest.mark.parametrize("entry", _entries("focus_wh_leads"))
def test_where_after_a_word_of_asking_asks_for_a_place(entry: str) -> None:
    assert "place" in question_focus(f"I {entry} where the bus stops").kinds


def _asks(kind: str, question: str) -> bool:
    focus = question_focus(question)
    return kind in focus.kinds and focus.explicit


def _wh_cases() -> list[object]:
    kinds = {
        "focus_wh_amount": "amount",
        "focus_wh_count": "count",
        "focus_wh_time": "time",
        "focus_wh_place": "place",
        "focus_wh_person": "person",
        "focus_wh_person_en": "person",
        "focus_wh_quantity": "quantity",
    }
    return [pytest.param(kind, entry, id=f"{name}-{entry}") for name, kind in kinds.items() for entry in _entries(name)]


@pytest.mark.parametrize(("kind", "entry"), _wh_cases())
def test_a_wh_word_asks_for_its_kind(kind: str, entry: str) -> None:
    question = f"Tell me {entry} the ticket" if entry.isascii() else f"チケットは{entry}ですか"
    assert _asks(kind, question)


@pytest.mark.parametrize("entry", _entries("focus_counters"))
def test_nan_with_a_counter_asks_for_a_count(entry: str) -> None:
    assert _asks("count", f"チケットは何{entry}ありますか")


_SUFFIX_EXAMPLES = {
    "料": "送料",
    "代": "電気代",
    "費": "交通費",
    "額": "総額",
    "賃": "運賃",
    "税": "消費税",
    "価格": "販売価格",
    "値段": "値段",
    "料金": "利用料金",
    "日": "投票日",
    "日程": "試合日程",
    "時間": "営業時間",
    "時期": "収穫時期",
    "期限": "申込期限",
    "期間": "受付期間",
    "年度": "開始年度",
    "時刻": "出発時刻",
    "日時": "開催日時",
    "締め切り": "締め切り",
    "締切": "応募締切",
    "場所": "集合場所",
    "会場": "試験会場",
    "住所": "住所",
    "所在地": "本社所在地",
    "窓口": "相談窓口",
    "数": "参加者数",
    "定員": "定員",
}


def _suffix_cases() -> list[object]:
    kinds = ("amount", "time", "place", "count")
    return [pytest.param(k, e, id=f"{k}-{e}") for k in kinds for e in _entries(f"focus_suffix_{k}")]


@pytest.mark.parametrize(("kind", "entry"), _suffix_cases())
def test_a_keyword_ending_in_a_kind_suffix_implies_the_kind(kind: str, entry: str) -> None:
    focus = question_focus(f"{_SUFFIX_EXAMPLES[entry]}は?")
    assert focus.kinds == (kind,) and not focus.explicit


# A question word used as an adverb asks for nothing; 何度も only shows in that it keeps apart
# the options before どちら (駅と…どちら would otherwise pick one of them, not ask where).
_ADVERBIAL_EXAMPLES = {
    "いつも": ("いつも混んでる?", ()),
    "いつでも": ("いつでも入れる?", ()),
    "どこでも": ("どこでも買える?", ()),
    "どこまでも": ("どこまでも続く?", ()),
    "何度も": ("駅と何度もどちらに行く?", ("place",)),
    "何回も": ("何回も並んだ?", ()),
}


@pytest.mark.parametrize("entry", _entries("focus_adverbial_wh"))
def test_a_question_word_used_as_an_adverb_asks_for_nothing(entry: str) -> None:
    question, kinds = _ADVERBIAL_EXAMPLES[entry]
    assert question_focus(question).kinds == kinds


@pytest.mark.parametrize("entry", _entries("focus_en_auxiliaries"))
def test_an_auxiliary_opens_a_yes_no_question(entry: str) -> None:
    assert question_focus(f"{entry.capitalize()} the museum free for children").yes_no


_YES_NO_EXAMPLES = {
    "か": "明日は休館ですか",
    "かな": "明日は休館かな",
    "っけ": "明日は休館だっけ",
    "の": "明日は休館なの",
}


@pytest.mark.parametrize("entry", _entries("focus_yes_no_endings"))
def test_an_ending_makes_a_yes_no_question(entry: str) -> None:
    assert question_focus(_YES_NO_EXAMPLES[entry]).yes_no


def _en_kind_cases() -> list[object]:
    kinds = ("amount", "time", "place")
    return [pytest.param(k, e, id=f"{k}-{e}") for k in kinds for e in _entries(f"focus_en_kind_{k}")]


@pytest.mark.parametrize(("kind", "entry"), _en_kind_cases())
def test_the_noun_after_what_is_the_names_the_kind(kind: str, entry: str) -> None:
    assert question_focus(f"What is the {entry}?").kinds == (kind,)


@pytest.mark.parametrize("entry", _entries("focus_honorifics"))
def test_a_name_is_read_without_the_viewers_honorific(entry: str) -> None:
    texts = _texts(f"青葉{entry}の出身は?")
    assert "青葉" in texts and f"青葉{entry}" not in texts


# --- what a sentence holds (holds_kind) ----------------------------------------------------
#
# Each case puts the entry in a sentence that holds the kind through it alone, and the same
# sentence with a neutral word in its place does not.

# (list, kind, sentence with {} for the entry, the neutral word)
_FILLS_CASES = (
    ("focus_fills_time_units", "time", "受付は3{}までです", "個"),
    ("focus_fills_time_words", "time", "受付は{}です", "窓口"),
    ("focus_fills_time_units_en", "time", "Delivery takes 3 {}.", "boxes"),
    ("focus_fills_time_words_en", "time", "The office opens {}.", "early"),
    ("focus_fills_currencies", "amount", "入場料は500{}です", "個"),
    ("focus_fills_currencies_en", "amount", "The ticket costs 20 {}.", "tickets"),
    ("focus_fills_amount_words", "amount", "入場は{}です", "自由"),
    ("focus_fills_amount_words_en", "amount", "Entry is {} for children.", "open"),
    ("focus_fills_rates", "amount", "参加率は30{}です", "人"),
    ("focus_fills_count_counters", "count", "参加者は三{}でした", "色"),
    ("focus_fills_quantity_counters", "quantity", "料金は三{}でした", "色"),
    ("focus_fills_numbers_en", "count", "There are {} buses.", "many"),
    ("focus_fills_quantity_words", "quantity", "席は{}埋まった", "ほぼ"),
    ("focus_fills_quantity_words_en", "quantity", "{} of the seats are taken.", "Most"),
)
# The boundary after a.m. and p.m. holds only where a word follows at once (9 a.m.から), not
# before a space or a full stop; and the number must start a word (開場は 9, not 開場は9).
_FILLS_EXAMPLES = {"a.m.": "開場は 9 {}からです", "p.m.": "開場は 9 {}からです"}


def _fills_cases() -> list[object]:
    return [
        pytest.param(
            kind, _FILLS_EXAMPLES.get(entry, template).format(entry), template.format(neutral), id=f"{name}-{entry}"
        )
        for name, kind, template, neutral in _FILLS_CASES
        for entry in _entries(name)
    ]


@pytest.mark.parametrize(("kind", "sentence", "neutral"), _fills_cases())
def test_a_word_of_the_kind_makes_a_sentence_hold_it(kind: str, sentence: str, neutral: str) -> None:
    assert holds_kind(kind, sentence) and not holds_kind(kind, neutral)


@pytest.mark.parametrize("entry", _entries("focus_fills_counters"))
def test_a_kanji_numeral_and_a_counter_make_a_count_and_a_number(entry: str) -> None:
    for kind in ("count", "quantity"):
        assert holds_kind(kind, f"参加者は三{entry}でした") and not holds_kind(kind, "参加者は三色でした")


# A term ending in the entry, read as a plain term (a three-character センター term is an org, which
# holds a place anyway; 山田センター is read as a person's): その所 and その区 are no terms at all.
_PLACE_EXAMPLES = {
    "所": "事務所に集まる",
    "センター": "山田センターに集まる",
    "区": "地区に集まる",
    "宛": "会社宛に送る",
}


@pytest.mark.parametrize("entry", _entries("focus_holds_place_suffix"))
def test_a_term_ending_in_a_place_suffix_names_a_place(entry: str) -> None:
    assert holds_kind("place", _PLACE_EXAMPLES.get(entry, f"その{entry}に集まる"))
    assert not holds_kind("place", "その仲間に集まる")


def test_bu_names_a_department_but_not_a_part() -> None:
    assert holds_kind("place", "その広報部に集まる") and not holds_kind("place", "その一部に集まる")


_PREPOSITION_EXAMPLES = {
    "at": "We met at Aoba.",
    "in": "We live in Aoba.",
    "on": "The stall is on Aoba Street.",
    "from": "The bus leaves from Aoba.",
}


@pytest.mark.parametrize("entry", _entries("focus_holds_place_prepositions_en"))
def test_a_preposition_before_a_capitalised_word_names_a_place(entry: str) -> None:
    sentence = _PREPOSITION_EXAMPLES[entry]
    assert holds_kind("place", sentence) and not holds_kind("place", sentence.replace(f" {entry} ", " near "))


@pytest.mark.parametrize("entry", _entries("focus_holds_place_nouns_en"))
def test_a_noun_of_where_to_ask_names_a_place(entry: str) -> None:
    assert holds_kind("place", f"Ask the {entry} for help.") and holds_kind("place", f"Ask the {entry}s for help.")
    assert not holds_kind("place", "Ask the driver for help.")


# その+entry where it makes a term; otherwise a common word ending in it (no name, no suffix else).
_PERSON_EXAMPLES = {"さん": "お客さんが来た", "様": "お客様が来た", "員": "店員が来た"}


@pytest.mark.parametrize("entry", _entries("focus_holds_person_suffix"))
def test_a_term_ending_in_a_person_suffix_names_a_person(entry: str) -> None:
    assert holds_kind("person", _PERSON_EXAMPLES.get(entry, f"その{entry}が来た"))
    assert not holds_kind("person", "その荷物が来た")
