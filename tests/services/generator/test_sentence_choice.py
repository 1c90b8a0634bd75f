"""The extractive answer carries the asked fact: the sentence that fills the question's slot, and a
second only when it adds to the answer."""

from __future__ import annotations

from kotae.citations import numbered_blocks
from kotae.contracts import Evidence, FaqEvidence
from kotae.language.text import split_sentences
from kotae.services.generator.sentence_choice import choose
from tests.factories import HEARING, TRANSPORT, TRANSPORT_EN


def sentences(*docs: Evidence) -> list:
    return [(b, s) for b in numbered_blocks(list(docs), []) for s in split_sentences(b.text)]


def test_a_when_question_gets_the_date_and_not_the_sentence_sharing_most_words() -> None:
    picked = choose("みなと線はいつから走るの？", sentences(TRANSPORT), max_sentences=2)
    assert [c.sentence for c in picked.chosen] == ["新しい路線バス「みなと線」は2027年10月1日に運行を始めます。"]


def test_english_when_question_gets_the_date_and_no_unrelated_second_sentence() -> None:
    """«When does the new bus line open?» used to add the sentence about the nursery."""
    picked = choose("When does the new bus line open?", sentences(TRANSPORT_EN), max_sentences=2)
    said = " ".join(c.sentence for c in picked.chosen)
    assert "1 October 2027" in said and "nursery" not in said


def test_a_how_much_question_gets_the_amount() -> None:
    picked = choose("路線バスの運賃っていくら？", sentences(TRANSPORT), max_sentences=2)
    assert "300円" in picked.chosen[0].sentence


def test_a_second_sentence_is_added_for_a_second_kind_asked_for() -> None:
    picked = choose("みなと線はいつから？運賃はいくら？", sentences(TRANSPORT), max_sentences=2)
    said = "".join(c.sentence for c in picked.chosen)
    assert "2027年10月1日" in said and "300円" in said


def test_nothing_relevant_is_nothing_to_quote_and_the_reason_says_what_was_missing() -> None:
    picked = choose("消費税は下げてくれるの？", sentences(TRANSPORT), max_sentences=2)
    assert picked.chosen == []
    assert "消費税" in picked.reason and "宿泊税" in picked.reason


def test_a_kana_spelling_still_finds_its_sentence() -> None:
    picked = choose("ほちょうき", sentences(HEARING), max_sentences=2)
    assert "3万円" in picked.chosen[0].sentence


def test_an_faq_entry_answering_the_same_question_is_quoted() -> None:
    """Asked where the street-speech schedule is, the FAQ's answer names the site; its question names the speeches."""
    faq = FaqEvidence(
        faq_id="faq-speech",
        question="街頭演説の予定はどこで見られますか？",
        answer="公式サイトと陣営のXアカウントで、毎日午前8時にその日の予定を更新しています。",
    )
    blocks = numbered_blocks([TRANSPORT], [faq])
    pairs = [(b, s) for b in blocks for s in split_sentences(b.text.split("\n", 1)[-1] if b.kind == "faq" else b.text)]
    picked = choose("街頭演説の予定はどこで確認できますか", pairs, max_sentences=2)
    assert picked.chosen and picked.chosen[0].block.kind == "faq", picked.reason
    assert "公式サイト" in picked.chosen[0].sentence


def doc(text: str, title: str = "梅雨") -> Evidence:
    return Evidence(doc_id="d", chunk_id="d#0", title=title, text=text)


def test_a_sentence_that_restates_the_question_is_quoted_with_the_next_one_that_answers_it() -> None:
    """…期間が出現することがある。この期間のことを梅雨の中休みという: alone, the first says nothing asked for."""
    text = (
        "梅雨入り当初は比較的しとしととした雨が連続することが多い。"
        "梅雨の半ばには一旦天気が回復する期間が出現することがある。"
        "この期間のことを梅雨の中休みという。"
        "梅雨の末期には雨量が多くなる。"
    )
    picked = choose("梅雨の半ばに一旦天気が回復する期間のことを何というか？", sentences(doc(text)), max_sentences=2)
    said = [c.sentence for c in picked.chosen]
    assert said == [
        "梅雨の半ばには一旦天気が回復する期間が出現することがある。",
        "この期間のことを梅雨の中休みという。",
    ]


def test_the_next_sentence_is_not_added_when_the_first_gives_the_kind_asked_for() -> None:
    text = "みなと線は2027年10月1日に運行を始める。みなと線の運賃は大人300円とする。"
    picked = choose("みなと線はいつから走るの？", sentences(doc(text, "交通")), max_sentences=2)
    assert [c.sentence for c in picked.chosen] == ["みなと線は2027年10月1日に運行を始める。"]


def test_english_a_restating_sentence_is_quoted_with_the_next_one_that_answers_it() -> None:
    text = (
        "The rainy season starts in June. "
        "In the middle of the rainy season there is sometimes a spell when the weather recovers. "
        "This spell is called the rainy season break. "
        "Heavy rain is common at its end."
    )
    question = "What is the spell when the weather recovers in the middle of the rainy season called?"
    picked = choose(question, sentences(doc(text, "Rainy season")), max_sentences=2)
    said = " ".join(c.sentence for c in picked.chosen)
    assert "rainy season break" in said, [c.sentence for c in picked.chosen]


PEACEKEEPING = (
    "1994年のルワンダ虐殺では停戦の合意が失われ、部隊は住民を守らずに撤退して強い批判を受けた。"
    "これを受け1999年には、国連事務総長が国際人道法の遵守を告示し、活動の性格が変わった。"
    "その後も部隊の派遣は続いている。"
)


def test_a_sentence_that_points_back_is_quoted_with_the_one_before_that_answers_it() -> None:
    """The question is written across both sentences: its event is named only in the first."""
    question = "国連事務総長が国際人道法の遵守を告示するきっかけとなった1994年に起きた事件とは何か。"
    picked = choose(question, sentences(doc(PEACEKEEPING, "平和維持活動")), max_sentences=2)
    said = [c.sentence for c in picked.chosen]
    assert len(said) == 2 and "ルワンダ虐殺" in said[1], said


def test_the_sentence_before_is_not_added_when_the_first_answers_alone() -> None:
    picked = choose("ルワンダ虐殺は何年に起きた？", sentences(doc(PEACEKEEPING, "平和維持活動")), max_sentences=2)
    assert [c.sentence for c in picked.chosen] == [split_sentences(PEACEKEEPING)[0]]


def test_a_next_sentence_that_points_back_continues_a_restating_one_though_its_slot_reads_low() -> None:
    """それらを深層Webなどと呼ぶが…: the name asked for is in a sentence that holds the question's
    words only through それら."""
    text = (
        "索引を付けられないがオンラインで使えるデータはインターネット上に多い。"
        "それらを深層Webなどと呼ぶが、検索エンジンはそうしたデータをほとんど扱っていない。"
        "深層Webには図書目録や公文書が含まれる。"
    )
    picked = choose("索引を付けられないがオンラインで使えるデータは何？", sentences(doc(text, "検索")), max_sentences=2)
    said = "".join(c.sentence for c in picked.chosen)
    assert "深層Web" in said, said


def test_a_fee_typed_alone_gets_the_sentence_that_introduces_it_and_the_one_giving_its_amount() -> None:
    """入湯税 names an amount; the sentence introducing the tax gives only its start date."""
    spa = Evidence(
        doc_id="spa-2027",
        chunk_id="spa-2027#a",
        title="温泉地の振興",
        text="(1) 2028年4月から入湯税を導入する。税額は1人1回150円。(2) 足湯を3か所整備する。",
        lang="ja",
    )
    picked = choose("入湯税", sentences(spa), max_sentences=2)
    assert [c.sentence for c in picked.chosen] == ["(1) 2028年4月から入湯税を導入する。", "税額は1人1回150円。"]
    assert picked.joined
    # A next sentence that opens another item is another answer, not this one's amount.
    alone = Evidence(
        **{**spa.model_dump(), "text": "(1) 2028年4月から入湯税を導入する。(2) 足湯を150円で使えるようにする。"}
    )
    other = choose("入湯税", sentences(alone), max_sentences=2)
    assert other.chosen[0].sentence == "(1) 2028年4月から入湯税を導入する。" and not other.joined
