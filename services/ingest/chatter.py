"""The offline question detector: a comment goes on to retrieval unless it is certainly chatter.

A question dropped here is lost for good, while a comment that reaches the retriever
and finds nothing ends ``unanswered`` at the cost of one search; so the rules drop
only what is certainly not a question:

* comments with nothing to search for: laughter (ｗｗ, 草), applause (888), emoji,
  kaomoji, bare greetings;
* comments made only of chat vocabulary — greetings, thanks, cheering, reactions and
  feelings (かわいい, 初見, 待機, 応援してます, "nice stream"), or a remark about the stream
  itself (声, 音, BGM … with 聞こえる, 小さい, いい …) — with no question form;
* the same spoken to someone by name (ミオちゃんこんにちは, ルカちゃんの声すき, 手話通訳さん、いつも
  ありがとう): a name with a suffix of address (:mod:`kotae.language.address`) says whom the
  comment speaks to, not what it asks about.

Everything else goes on: a bare keyword in any script or width (宿泊税, ほちょうき,
ﾊﾞｽ代), a noun phrase ending in は/のは (創設者は), hearsay (〜って聞いた), requests
(なんとかして), complaints and personal situations (うちの子が〜で詰んでる): the
retriever's gate decides whether the knowledge base covers them.

The vocabulary is Sudachi's normalised forms (``kotae.language.text.search_tokens``),
so 可愛い, かわいい and カワイイ are one word, and compounds are never broken into chat
words: ファンクラブ is not ファン.
"""

from __future__ import annotations

import re
import unicodedata

from kotae.knowledge.records import detect_lang
from kotae.language import lexicon
from kotae.language.address import without_forms_of_address
from kotae.language.text import normalize, search_tokens

# --- question forms: a comment that asks is never chatter ---------------------------------

_QUESTION_WORDS_JA = lexicon.alternation("chatter_question_words_ja")
_ASKING_JA = lexicon.alternation("chatter_asking_ja")
# Spellings with a structure (なんで/なんだ/なんの, ません?か) stay here, with the ones ending in ?
# (a comment with ? asks already); the words are lists.
_JA_QUESTION = re.compile(
    rf"({_QUESTION_WORDS_JA}|{_ASKING_JA}|なん[でだの?]|ません?か|ある\?|できる\?|出来る\?|って\?|は\?|なの\?|の\?|か\?)"
)
_JA_FINAL = re.compile(r"(か|の|かな|っけ|って|てよ|てね|てる\?|たい\?)[\s!?。]*$")
_JA_REQUEST = re.compile("(" + lexicon.alternation("chatter_request_ja") + ")")
# Question words used as adverbs or exclamations ask nothing (いつも, 何これ, そうか): they are
# removed before the question patterns run.
_JA_NOT_ASKING = re.compile("(" + lexicon.alternation("chatter_not_asking_ja") + ")")
_OPENERS_EN = lexicon.alternation("chatter_question_openers_en")
_PHRASES_EN = lexicon.alternation("chatter_question_phrases_en")
_EN_QUESTION = re.compile(
    rf"^({_OPENERS_EN})\b|\b({_PHRASES_EN}|i'?d like to know|any plans?)\b",
    re.IGNORECASE,
)
# Exclamations shaped like questions: "what a great stream", "how cute".
_EXCLAIM_ADJECTIVES_EN = lexicon.alternation("chatter_exclaim_en")
_EN_EXCLAIM = re.compile(rf"^(what an?|how ({_EXCLAIM_ADJECTIVES_EN}))\b", re.IGNORECASE)

# --- chat vocabulary (normalised forms, see each list's file) ----------------------------

_REACTIONS = lexicon.words("chatter_reactions")
_STREAM = lexicon.words("chatter_stream")
_REMARKS = lexicon.words("chatter_remarks")
_FILLERS = lexicon.words("chatter_fillers")

# Fixed chat expressions that Sudachi would read as words (キタ as 北, 今北産業 as 今北 + 産業).
_EXPRESSIONS = re.compile(r"(キタ|きた)[ー━!]+|今北産業|8{3,}|[wｗ]{2,}")


def _wordlike(token: str) -> bool:
    """A token holding a letter or digit (kaomoji leave marks such as ゚ behind)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in token)


def asks(normalized: str) -> bool:
    """True when the comment has a question or request form (?, 何/いつ/いくら, ですか, 教えて, what/how …)."""
    if "?" in normalized:
        return True
    if detect_lang(normalized) == "ja":
        asking = _JA_NOT_ASKING.sub("", normalized)
        return bool(_JA_QUESTION.search(asking) or _JA_FINAL.search(asking) or _JA_REQUEST.search(asking))
    if _EN_EXCLAIM.search(normalized):
        return False
    return bool(_EN_QUESTION.search(normalized))


def is_chatter(text: str) -> bool:
    """True only for what is certainly not a question (see the module docstring).

    Example::

        >>> is_chatter("声めっちゃ聞きやすい"), is_chatter("ﾊﾞｽ代"), is_chatter("じいちゃん免許返したら買い物行けなくなる")
        (True, False, False)
    """
    norm = normalize(text)
    tokens = [t for t in search_tokens(_EXPRESSIONS.sub(" ", norm)) if _wordlike(t)]
    if not tokens:
        return True  # nothing to search for: laughter, applause, emoji, a bare greeting
    if asks(norm):
        return False
    # A name the comment calls someone by (ミオちゃん, 手話通訳さん) says whom it speaks to, not a topic.
    words = {t for t in search_tokens(without_forms_of_address(_EXPRESSIONS.sub(" ", norm))) if _wordlike(t)}
    if not words:
        return True  # a name called, with a greeting or nothing else
    if not words <= _REACTIONS | _STREAM | _REMARKS | _FILLERS:
        return False  # a word that may name a topic: the gate decides
    return bool(words & _REACTIONS) or bool(words & _STREAM and words & _REMARKS) or words <= _FILLERS


def is_question(text: str) -> bool:
    """True for every comment that may be a question or request: all but certain chatter."""
    return not is_chatter(text)
