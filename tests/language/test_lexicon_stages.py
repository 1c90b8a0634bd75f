"""The stages' word lists at work: each entry changes what chat triage, sentence choice or the reading
of a model's reply decides, in the function its caller relies on."""

from __future__ import annotations

import pytest

from kotae import model_reply
from kotae.citations import numbered_blocks
from kotae.contracts import Evidence
from kotae.language import lexicon
from kotae.language.text import normalize, search_tokens, split_sentences
from kotae.providers import BadReply
from kotae.services.generator.sentence_choice import choose
from kotae.services.ingest import chatter

LEXICONS = (
    "chatter_reactions",
    "chatter_stream",
    "chatter_remarks",
    "chatter_fillers",
    "chatter_question_words_ja",
    "chatter_asking_ja",
    "chatter_request_ja",
    "chatter_not_asking_ja",
    "chatter_question_openers_en",
    "chatter_question_phrases_en",
    "chatter_exclaim_en",
    "choice_points_back",
    "choice_goes_on",
    "reply_true",
    "reply_false",
    "reply_null",
    "reply_citation_words",
    "reply_label_words",
)

# Comments that show an entry at work where the entry alone would not: its own spelling asks
# (本当, 確か ends in か) or is read as another word.
CHAT_EXAMPLES = {
    "本当": "ホント",
    "確か": "確かに",
    "lol": "lols",
    "lit": "lits",
    "推し": "推しの配信",
}


def _chat_example(entry: str, template: str) -> str:
    return CHAT_EXAMPLES.get(entry, template.format(entry))


def _dropped_as_chatter(text: str, entry: str) -> None:
    assert entry in search_tokens(normalize(text)), f"{text} is not read with {entry}"
    assert chatter.is_chatter(text) and not chatter.is_question(text)


@pytest.mark.parametrize("entry", lexicon.entries("chatter_reactions"))
def test_a_reaction_alone_is_chatter(entry):
    _dropped_as_chatter(_chat_example(entry, "{}"), entry)


@pytest.mark.parametrize("entry", lexicon.entries("chatter_fillers"))
def test_a_filler_alone_is_chatter(entry):
    _dropped_as_chatter(_chat_example(entry, "{}"), entry)


@pytest.mark.parametrize("entry", lexicon.entries("chatter_stream"))
def test_the_stream_with_a_remark_is_chatter(entry):
    _dropped_as_chatter(_chat_example(entry, "{} 聞こえる"), entry)


@pytest.mark.parametrize("entry", lexicon.entries("chatter_remarks"))
def test_a_remark_on_the_stream_is_chatter(entry):
    _dropped_as_chatter(_chat_example(entry, "音 {}"), entry)


# Comments that show an entry at work where the template would not: a request ending in て asks
# alone, while 〜てね would ask by its ending whatever the list held.
ASK_EXAMPLES = {"教えて": "教えて", "聞かせて": "聞かせて", "説明して": "説明して", "おしえて": "おしえて"}


def _asks(text: str) -> bool:
    return chatter.asks(normalize(text))


@pytest.mark.parametrize("entry", lexicon.entries("chatter_question_words_ja"))
def test_a_japanese_question_word_asks(entry):
    assert _asks(ASK_EXAMPLES.get(entry, f"{entry}ね"))


@pytest.mark.parametrize("entry", lexicon.entries("chatter_asking_ja"))
def test_a_japanese_asking_ending_asks(entry):
    assert _asks(ASK_EXAMPLES.get(entry, f"{entry}ね"))


@pytest.mark.parametrize("entry", lexicon.entries("chatter_request_ja"))
def test_a_japanese_request_asks(entry):
    assert _asks(ASK_EXAMPLES.get(entry, f"{entry}ね"))


@pytest.mark.parametrize("entry", lexicon.entries("chatter_not_asking_ja"))
def test_a_question_word_used_as_an_adverb_asks_nothing(entry):
    assert not _asks(entry)


@pytest.mark.parametrize("entry", lexicon.entries("chatter_question_openers_en"))
def test_an_english_comment_opening_so_asks(entry):
    assert _asks(f"{entry.capitalize()} the new bus line")


@pytest.mark.parametrize("entry", lexicon.entries("chatter_question_phrases_en"))
def test_an_english_phrase_of_asking_asks_anywhere(entry):
    assert _asks(f"so {entry} the new bus line")


@pytest.mark.parametrize("entry", lexicon.entries("chatter_exclaim_en"))
def test_how_with_an_adjective_exclaims(entry):
    assert not _asks(f"How {entry} this stream is")


def _sentences(text: str, title: str) -> list:
    evidence = Evidence(doc_id="d", chunk_id="d#a", title=title, text=text, lang="ja")
    return [(b, s) for b in numbered_blocks([evidence], []) for s in split_sentences(b.text)]


@pytest.mark.parametrize("entry", lexicon.entries("choice_points_back"))
def test_a_best_sentence_that_points_back_is_quoted_with_the_one_before(entry):
    text = (
        "1994年のルワンダ虐殺では停戦の合意が失われ、部隊は住民を守らずに撤退して強い批判を受けた。"
        f"{entry}を受け1999年には、国連事務総長が国際人道法の遵守を告示し、活動の性格が変わった。"
    )
    question = "国連事務総長が国際人道法の遵守を告示するきっかけとなった1994年に起きた事件とは何か。"
    said = [c.sentence for c in choose(question, _sentences(text, "平和維持活動"), max_sentences=2).chosen]
    assert len(said) == 2 and "ルワンダ虐殺" in said[1], said


@pytest.mark.parametrize("entry", lexicon.entries("choice_goes_on"))
def test_a_next_sentence_that_goes_on_is_quoted_after_the_best(entry):
    text = f"5月下旬から6月上旬ごろになると、西日本では梅雨入りする。{entry}、東日本はまだ梅雨入りしない。"
    said = [
        c.sentence
        for c in choose("5月下旬から6月上旬ごろの東日本は？", _sentences(text, "梅雨"), max_sentences=2).chosen
    ]
    assert len(said) == 2 and said[1].startswith(entry), said


@pytest.mark.parametrize("entry", lexicon.entries("reply_true"))
def test_a_reply_word_for_true(entry):
    assert model_reply.as_bool(f" {entry.upper()} ", "answerable") is True


@pytest.mark.parametrize("entry", lexicon.entries("reply_false"))
def test_a_reply_word_for_false(entry):
    assert model_reply.as_bool(f" {entry.upper()} ", "answerable") is False


@pytest.mark.parametrize("entry", lexicon.entries("reply_null"))
def test_a_reply_word_for_null(entry):
    assert model_reply.as_bool(entry.upper(), "answerable") is None


def test_a_reply_word_in_no_list_is_refused():
    with pytest.raises(BadReply):
        model_reply.as_bool("maybe", "answerable")


@pytest.mark.parametrize("entry", lexicon.entries("reply_citation_words"))
def test_a_word_before_the_block_number_is_read_as_a_citation(entry):
    cited = model_reply.citation_markers(f"保育料は無料です［{entry.capitalize()} ２］。")
    assert cited == "保育料は無料です[2]。"


@pytest.mark.parametrize("entry", lexicon.entries("reply_label_words"))
def test_a_label_before_the_line_is_cut_off(entry):
    assert model_reply.one_line(f"{entry}：「保育料の上限はいくらですか」") == "保育料の上限はいくらですか"
