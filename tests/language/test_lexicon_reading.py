"""The word lists of the readers (search tokens, sentence analysis, key terms, relevance, the answer
slot), each entry shown at work in the function that reads it: remove an entry and its case fails.

Japanese entries are Sudachi's normalised forms (為る, 其れ), so each has an example sentence
that holds a word read as it.
"""

from __future__ import annotations

import pytest

from kotae.language import lexicon
from kotae.language.answer_slot import asks_for_slot, place_signs, question_slot
from kotae.language.morphemes import morphemes, units
from kotae.language.relevance import APART, relevance
from kotae.language.sentence_analysis import analyse, negations
from kotae.language.terms import key_terms
from kotae.language.text import normalize, search_tokens

LEXICONS = (
    "search_stop_ja",
    "search_stop_en",
    "search_set_aside",
    "analysis_rounding",
    "analysis_stop_ja",
    "analysis_stop_en",
    "analysis_wh_ja",
    "analysis_wh_en",
    "analysis_org_suffix",
    "analysis_negators_ja",
    "analysis_negators_en",
    "terms_light",
    "terms_question_noun",
    "terms_honorific",
    "relevance_optional_heads",
    "relevance_generic_counted",
    "slot_anaphora",
    "slot_naming",
    "slot_choice",
)


def cases(name: str) -> list:
    return list(lexicon.entries(name))


def _forms(text: str, mode: str) -> list[str]:
    """Normalised forms of the words of ``text`` and of their short units."""
    words = units(normalize(text), "B") if mode == "B" else morphemes(normalize(text))
    return [u.form for m in words for u in (m, *m.short)]


# --- search tokens (text.py) ----------------------------------------------------------------

SEARCH_STOP_JA = {
    "為る": "住民票を申請する",
    "成る": "送料が無料になる",
    "有る": "駐車場がある",
    "居る": "猫がいる",
    "言う": "名前を言う",
    "出来る": "予約できる",
    "思う": "行くと思う",
    "事": "大事な事",
    "物": "予約したもの",
    "何": "何人",
    "幾ら": "延長保証いくら",
    "方": "こっちのほうが安い",
    "所": "今のところ",
    "様": "見た様だ",
    "為": "形が違うため",
    "訳": "訳がある",
    "積もり": "行くつもりだ",
    "今": "今だけ無料",
    "皆": "みんなの意見",
    "の": "",
}


@pytest.mark.parametrize("entry", cases("search_stop_ja"))
def test_a_japanese_stop_word_is_no_search_token(entry):
    text = SEARCH_STOP_JA[entry]
    assert entry in _forms(text, "B")
    assert entry not in search_tokens(text)


@pytest.mark.parametrize("entry", cases("search_stop_en"))
def test_an_english_stop_word_is_no_search_token(entry):
    assert search_tokens(f"{entry} bus") == ["bus"]


SET_ASIDE = {"以外": "市役所以外でどこで投票できますか", "を 除い": "市役所を除いてどこで投票できますか"}


@pytest.mark.parametrize("entry", cases("search_set_aside"))
def test_a_noun_a_question_sets_aside_is_no_key_term(entry):
    text = SET_ASIDE.get(entry, f"市役所{entry.replace(' ', '')}にどこで投票できますか")
    assert [m.surface for m in morphemes(text)][1 : 1 + len(entry.split())] == entry.split()
    assert [t.surface for t in key_terms(text)] == ["投票"]


# --- sentence analysis ----------------------------------------------------------------------


@pytest.mark.parametrize("entry", cases("analysis_rounding"))
def test_a_rounding_word_ends_a_phrase(entry):
    assert [t.text for t in analyse(f"上旬{entry}東日本").terms] == ["上旬", "東日本"]


ANALYSIS_STOP_JA = {
    **SEARCH_STOP_JA,
    "其れ": "それは寒い",
    "此れ": "これ買う",
    "ます": "川でますを釣った",
    "此の": "この先",
    "其の": "その後",
    "等": "二等",
    "的": "的を射る",
    "他": "他の事務所",
    "又": "",
    "中": "家の中",
    "以上": "5mm以上",
    "以下": "中学生以下",
}


@pytest.mark.parametrize("entry", cases("analysis_stop_ja"))
def test_a_japanese_stop_word_is_no_content_form(entry):
    text = ANALYSIS_STOP_JA[entry]
    assert entry in _forms(text, "C")
    assert entry not in analyse(text).words


@pytest.mark.parametrize("entry", cases("analysis_stop_en"))
def test_an_english_stop_word_is_no_content_form_nor_a_name(entry):
    capitalised = entry[0].upper() + entry[1:]
    for text in (f"bus {entry} bus", f"bus {capitalised} bus"):
        token = analyse(text).tokens[1]
        assert token.forms == () and token.pos == ("stop",), text


WH_JA = {
    "何": ("何を買う", "何"),
    "誰": ("誰が来る", "誰"),
    "どこ": ("どこに行く", "どこ"),
    "いつ": ("いつ来る", "いつ"),
    "どれ": ("どれを買う", "どれ"),
    "どの": ("どの店", "どの"),
    "どちら": ("どちらが安い", "どちら"),
    "どっち": ("どっちが安い", "どっち"),
    "如何": ("いかがですか", "いかが"),
    "幾つ": ("幾つある", "幾つ"),
    "幾ら": ("幾らする", "幾ら"),
    "いくら": ("いくら丼を食べる", "いくら"),
    "なぜ": ("なぜなぜ分析をする", "なぜなぜ分析"),
    "どんな": ("どんな店", "どんな"),
    "どう": ("どう思う", "どう"),
}


@pytest.mark.parametrize("entry", cases("analysis_wh_ja"))
def test_a_japanese_wh_word_marks_its_token(entry):
    text, surface = WH_JA[entry]
    assert [t.wh for t in analyse(text).tokens if t.surface == surface] == [True]


@pytest.mark.parametrize("entry", cases("analysis_wh_en"))
def test_an_english_wh_word_marks_its_token(entry):
    assert analyse(f"{entry} bus").tokens[0].wh


@pytest.mark.parametrize("entry", cases("analysis_org_suffix"))
def test_a_phrase_ending_like_an_organisation_names_one(entry):
    terms = analyse(f"ソラボ{entry}に行く").terms
    assert [(t.text, t.kind) for t in terms] == [(f"ソラボ{entry}", "org")]


NEGATORS_JA = {
    "ない": "行かない",
    "なかっ": "行かなかった",
    "なく": "行かなくて",
    "なけれ": "行かなければ",
    "ず": "行かずに",
    "ぬ": "知らぬ",
    "ん": "行かん",
    "ざる": "知らざる",
    "ね": "行かねば",
    "無い": "お金が無い",
    "無かっ": "お金が無かった",
    "無く": "お金が無くて",
    "なし": "問題なし",
    "無し": "問題無し",
}


@pytest.mark.parametrize("entry", cases("analysis_negators_ja"))
def test_a_japanese_negator_counts(entry):
    sentence = analyse(NEGATORS_JA[entry])
    assert entry in [t.surface for t in sentence.tokens]
    assert negations(sentence) == 1


@pytest.mark.parametrize("entry", cases("analysis_negators_en"))
def test_an_english_negator_counts(entry):
    assert negations(analyse(f"the bus {entry} stops")) == 1


# --- key terms --------------------------------------------------------------------------------

LIGHT = {
    "事": "大事な事",
    "物": "予約した物",
    "者": "申請した者",
    "方": "こっちの方が安い",
    "所": "いいトコだ",
    "為": "形が違う為",
    "訳": "訳がある",
    "様": "そのさまを見た",
    "筈": "届く筈",
    "積もり": "行く積もり",
    "人": "来た人",
    "気": "気がする",
    "感じ": "いい感じ",
    "本当": "本当の話",
    "奴": "高い奴",
    "辺": "駅の辺",
    "中": "家の中",
    "上": "机の上",
    "下": "机の下",
    "前": "駅の前",
    "後": "雨の後",
    "他": "他の店",
    "次": "次の駅",
    "今": "今の店",
}


@pytest.mark.parametrize("entry", cases("terms_light"))
def test_a_light_noun_is_no_key_term(entry):
    text = LIGHT[entry]
    noun = next(m for m in morphemes(text) if entry in (m.form, m.surface))
    assert noun.pos[0] == "名詞"
    assert noun.surface not in [t.surface for t in key_terms(text)]


QUESTION_NOUN = {
    "何": "何事",
    "なに": "なにごと",
    "なん": "なんこつ",
    "幾": "幾三",
    "いく": "いくさ",
    "どれ": "どれい",
    "どこ": "どこ",
    "いつ": "いつわり",
}


@pytest.mark.parametrize("entry", cases("terms_question_noun"))
def test_a_noun_that_asks_is_no_key_term(entry):
    noun = QUESTION_NOUN[entry]
    text = f"{noun}の話を聞いた"
    assert [m.surface for m in morphemes(text)][0] == noun
    assert [t.surface for t in key_terms(text)] == ["話"]


@pytest.mark.parametrize("entry", cases("terms_honorific"))
def test_an_honorific_prefix_makes_no_compound(entry):
    text = {"お": "お店", "ご": "ご予約", "御": "御礼"}[entry]
    (term,) = key_terms(text)
    assert term.surface == text and not term.specific


# --- relevance ----------------------------------------------------------------------------------

OPTIONAL_HEADS = {
    "代": ("バス代", "バス"),
    "費": ("交通費", "交通"),
    "料": ("駐車料", "駐車"),
    "額": ("補助額", "補助"),
    "賃": ("電車賃", "電車"),
    "金": ("入会金", "入会"),
    "日": ("投票日", "投票"),
    "時": ("開店時", "開店"),
}


@pytest.mark.parametrize("entry", cases("relevance_optional_heads"))
def test_an_optional_head_is_not_required_of_the_answer(entry):
    compound, word = OPTIONAL_HEADS[entry]
    said = f"{word}は市の広報に載っています。"
    r = relevance(f"{compound}を教えて", [said], [("", said)])
    assert [(m.term.text, m.credit) for m in r.matches] == [(compound, APART)]


@pytest.mark.parametrize("entry", cases("relevance_generic_counted"))
def test_a_generic_count_need_not_be_named(entry):
    said = "The bakery sold 300 at the station market in May."
    r = relevance(f"How many {entry} did the bakery sell at the station market in May?", [said], [("Bakery", said)])
    assert entry in [m.term.text for m in r.matches if m.where == "nowhere"]
    assert r.relevant


# --- the answer slot ------------------------------------------------------------------------------

ANAPHORA = {"同": "同島", "本": "本島", "当": "当島", "彼": "彼"}


@pytest.mark.parametrize("entry", cases("slot_anaphora"))
def test_a_sentence_that_refers_back_holds_the_words_before(entry):
    evidence = [
        (1, analyse("梅雨は北海道にない。")),
        (1, analyse(f"{ANAPHORA.get(entry, entry)}は小笠原諸島も同じだ。")),
    ]
    slot = question_slot(analyse("梅雨がないのは北海道とどこか。"), None, evidence)
    (term,) = [t for t in evidence[1][1].terms if t.text == "小笠原諸島"]
    assert place_signs(evidence, 1, term.start, term.end, slot)["held"] > 0.5


@pytest.mark.parametrize("entry", cases("slot_naming"))
def test_a_question_asks_what_something_is_called(entry):
    evidence = [(1, analyse("この花はサクラと呼ぶ。"))]
    assert question_slot(analyse(f"この花の{entry}を教えて"), None, evidence).naming


CHOICE = {
    "どちら": "東京と大阪のどちらが大きいの",
    "どっち": "バスと電車のどっちが安いの",
    "どれ": "三つの店のどれが安いの",
    "いずれ": "いずれの店がいつ開くの",
    "それとも": "バスはいつ来るの、それとも歩くの",
    "のうち": "三つのうち何が安いの",
}


@pytest.mark.parametrize("entry", cases("slot_choice"))
def test_a_question_that_offers_its_answers_asks_for_no_slot(entry):
    question = analyse(CHOICE[entry])
    assert any(t.wh for t in question.tokens) and not asks_for_slot(question)
