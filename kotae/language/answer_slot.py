"""The answer slot of a question: what it asks for, and how well a place in the evidence fills it.

A question names its topic and leaves one thing open — the slot (北海道と｜どこ｜か, 何を営む,
ドミニカ国の首都は？). Every phrase of the evidence stands somewhere; a place is scored by a
weighted sum of signs that it fills the slot (``SLOT_WEIGHTS``): how much of the question its
sentence and its clause hold, how closely the question's words (rare ones, and those near the
wh-word, weigh more) surround it, whether the words and the case particle next to the wh-word
(北海道と｜どこ, 何を営む) recur next to it, whether it is the kind of thing the question names
(何暦 → 小暦), and, for "何という" questions, whether it stands where a name is given. A sentence
that refers back (これ, 後者 …) also holds the words of the sentence before it.

Used by the verifier (does a bare answer stand where the question's slot is filled, at least
about as well as every rival phrase of its kind?) and by the extractive generator (which
sentence fills the slot best?).

Example::

    >>> from kotae.language.sentence_analysis import analyse, evidence_sentences
    >>> evidence = [(1, s) for s in evidence_sentences("梅雨は北海道と小笠原諸島を除く日本でみられる。")]
    >>> slot = question_slot(analyse("日本で梅雨がないのは北海道とどこか。"), None, evidence)
    >>> s = evidence[0][1]
    >>> at = {t.text: place_signs(evidence, 0, t.start, t.end, slot) for t in s.terms}
    >>> at["小笠原諸島"]["anchor_before"], at["日本"]["anchor_before"]
    (1.0, 0.0)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kotae.language import lexicon
from kotae.language.sentence_analysis import Analysis, Token, attached
from kotae.language.text import is_japanese

# A bare answer is judged only against evidence that addresses its question: the evidence's
# sentence holding most of the question must hold at least this share of its words (by rarity).
EVIDENCE_HELD = 0.1
# How much each sign that a place in the evidence fills the question's slot counts (see
# place_signs). Fitted on the development split of bench/verifier.py — a softmax over the
# places of each question's candidate phrases, with the right answer's places as the target —
# and rounded to 0.05 with "near" as the unit. Refit, and compare, with
#     python bench/verifier_fit.py
SLOT_WEIGHTS = {
    "held": 0.45,  # share of the question's words its sentence holds
    "top": 0.5,  # its sentence holds as much of the question as any
    "near": 1.0,  # closeness of the question's words
    "window": 0.85,  # share of the question's words within WINDOW tokens
    "clause": 0.6,  # share of the question's words in its own clause
    "echo": 0.6,  # the text around the wh-word recurs around it
    "anchor_before": 0.4,  # the words right before the wh-word are right before it
    "anchor_after": 0.3,  # the words right after the wh-word are right after it
    "particle": 0.55,  # it takes the particle the wh-word takes (誰が ~ Xが)
    "kind_noun": 0.75,  # it ends like the noun that names what is asked (公用語 ~ ラーオ語)
    "naming": 0.35,  # "何という" questions: it stands where a name is given (「X」, Xと呼ぶ, Xは…のこと)
}
# A bare answer's best place may trail the best place of another phrase of its kind by at most
# this much. Set on the development split so that at least 85% of wrong bare answers are caught
# (the margin sweep of bench/verifier_fit.py).
SLOT_MARGIN = 0.55
# The same for English, where there is no split to set it on and fewer signs apply (no particles,
# no kind noun): the stricter margin the method used before, so English bare answers fail closed.
SLOT_MARGIN_EN = 0.1
# Share of the character bigrams of ECHO_TOKENS tokens either side of the question's wh-word
# found as many tokens either side of a phrase: its echo.
ECHO_TOKENS = 6
# Distance counted for a question word inside the phrase itself (首都 of 首都ヴィエンチャン).
INSIDE = 0
# Distance (in tokens) at which a question word counts half toward closeness.
SLOT_DECAY = 8.0
# Tokens either side of a phrase within which a question word counts toward "window".
WINDOW = 5
# Distance (in tokens) from the question's wh-word at which a question word weighs half.
QUESTION_DECAY = 3.0
# A claim with no predicate of its own and at most this many content words leans on the question.


@dataclass(frozen=True)
class _Asked:
    """One content word of the question: its forms, its rarity in the evidence, its nearness to the wh-word."""

    forms: frozenset[str]
    rarity: float
    near: float


def _distance(sentence: Analysis, start: int, end: int, forms: frozenset[str]) -> int | None:
    """Tokens between tokens[start:end] and the nearest token carrying one of ``forms`` (INSIDE within)."""
    best = None
    for form in forms:
        for i in sentence.positions.get(form, ()):
            d = INSIDE if start <= i < end else start - i if i < start else i - end + 1
            best = d if best is None else min(best, d)
    return best


def _bigrams(text: str) -> set[str]:
    return {text[i : i + 2] for i in range(len(text) - 1)}


def _anchor_texts(pair: list[Token], nearest: list[Token]) -> tuple[str, ...]:
    """Two tokens ("北海道と", "と呼ぶ"), and the nearest alone when it is a word long
    enough to mean something by itself ("opened" in "Who opened the service?")."""
    out = []
    both = "".join(t.surface for t in pair)
    if len(both) >= 2:
        out.append(both)
    if len(pair) > 1 and nearest and len(nearest[0].surface) >= 3:
        out.append(nearest[0].surface)
    return tuple(out)


def _anchors(question: Analysis) -> tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]:
    """The text right before and right after the question's wh-word (北海道と｜どこ｜か),
    and the character bigrams of a few tokens either side of it (its echo)."""
    tokens = question.tokens
    wh = next((i for i, t in enumerate(tokens) if t.wh), None)
    if wh is None:
        # "ドミニカ国の首都は？", "軌道長半径とは": the slot is the end of the question.
        wh = len(tokens)
        while wh > 0 and tokens[wh - 1].pos[0] == "補助記号":
            wh -= 1
        tokens = tokens[:wh] + (Token("", (), ("補助記号",), None, True),)
    end = wh + 1
    while end < len(tokens) and attached(tokens[end]):
        end += 1
    left_tokens = tokens[max(0, wh - 2) : wh]
    right_tokens = [t for t in tokens[end : end + 2] if t.pos[0] not in ("補助記号",)]
    # A bare sentence-final particle (…か。) anchors nothing.
    if right_tokens and right_tokens[0].pos[:2] == ("助詞", "終助詞"):
        right_tokens = []
    left = _anchor_texts(left_tokens, left_tokens[-1:])
    right = _anchor_texts(right_tokens, right_tokens[:1])
    echo = "".join(t.surface for t in tokens[max(0, wh - ECHO_TOKENS) : wh])
    echo += "".join(t.surface for t in tokens[end : end + ECHO_TOKENS] if t.pos[0] != "補助記号")
    return left, right, frozenset(_bigrams(echo))


def _asked(question: Analysis, own: frozenset[str] | None, evidence: list[tuple[int, Analysis]]) -> list[_Asked]:
    """The question's content words (less the forms in ``own``), weighted.

    Rarer words in the evidence weigh more (the article's topic is in every sentence), and
    so do words close to the wh-word (or the end of a question without one), which
    describe the slot rather than the topic.
    """
    n = len(evidence)
    wh = next((i for i, t in enumerate(question.tokens) if t.wh), None)
    out = []
    for i, t in enumerate(question.tokens):
        if not t.forms or (own is not None and not own.isdisjoint(t.forms)):
            continue
        rarity = max(math.log(1 + n / (1 + sum(f in s.words for _, s in evidence))) for f in t.forms)
        near = 1.0 / (1.0 + abs(i - (len(question.tokens) if wh is None else wh)) / QUESTION_DECAY)
        out.append(_Asked(frozenset(t.forms), rarity, near))
    return out


def is_alias(sentence: Analysis, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Is one span a parenthesised reading or alias of the other (蘭学(らんがく), 1888年(仏暦2431年))?"""
    owners = sentence.owners
    tokens = sentence.tokens

    def head_end(span: tuple[int, int]) -> int:
        end = span[1]
        while end < len(tokens) and attached(tokens[end]):
            end += 1
        return end

    return any(a[0] <= owners[i] < head_end(a) for i in range(*b)) or any(
        b[0] <= owners[i] < head_end(b) for i in range(*a)
    )


_ANAPHORA = re.compile("^(" + lexicon.alternation("slot_anaphora") + ")")


def _refers_back(sentence: Analysis, before: int) -> bool:
    """Does the sentence point back to the one before it ahead of token ``before``?"""
    return any(_ANAPHORA.match(t.surface) for t in sentence.tokens[:before])


def _held(evidence: list[tuple[int, Analysis]], n: int, start: int, asked: list[_Asked]) -> float:
    """Share (by rarity) of the question's words that sentence ``n`` holds.

    A sentence that refers back before ``start`` ("後者はリズムを奏でる。", "これを…と呼ぶ。")
    also holds the words of the sentence before it.
    """
    sentence = evidence[n][1]
    around = set(sentence.words)
    if n > 0 and _refers_back(sentence, start):
        around |= evidence[n - 1][1].words
    return sum(w.rarity for w in asked if not w.forms.isdisjoint(around)) / sum(w.rarity for w in asked)


# --- the slot ------------------------------------------------------------------------------

# Case particles, with は read as が: 誰が ~ Xは.
_CASE = {
    "が": "が",
    "は": "が",
    "を": "を",
    "に": "に",
    "へ": "に",
    "で": "で",
    "と": "と",
    "の": "の",
    "から": "から",
    "まで": "まで",
    "より": "より",
}
_NAMING = re.compile("(何|なん|なに)(と|て)(いう|言う|いい|言い|呼|称|読|表)|" + lexicon.alternation("slot_naming"))
# A question that offers its answers (AとBのどちらか, 長い？短い？) may be answered with its own words.
CHOICE = re.compile(lexicon.alternation("slot_choice") + r"|か[、,？?]|[？?].+[？?]|か.+か|\bor\b|\bwhich\b", re.I)
_CLOSING = (")", "]", "」", "』", "】")


@dataclass(frozen=True)
class Slot:
    """What a question asks for, as far as words can tell."""

    asked: tuple[_Asked, ...]
    anchors: tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]
    particle: str | None  # the case particle after the wh-word
    kind_noun: str  # the noun naming what is asked: 公用語 (ラオスの公用語は何), 気団 (何気団)
    naming: bool  # asks what something is called
    top_held: float  # the most of the question one sentence of the evidence holds


def _particle_after(tokens: tuple[Token, ...], end: int) -> str | None:
    while end < len(tokens) and (attached(tokens[end]) or tokens[end].surface in _CLOSING):
        end += 1
    if end < len(tokens) and tokens[end].pos[0] == "助詞":
        return _CASE.get(tokens[end].surface)
    return None


def kind_noun(question: Analysis) -> str:
    """The noun that names what is asked: after the wh-word (何気団, どこの国), or the last
    noun before it (ラオスの公用語はなにか, ドミニカ国の首都は？)."""
    tokens = question.tokens
    wh = next((i for i, t in enumerate(tokens) if t.wh), None)
    if wh is not None:
        end = wh + 1
        while end < len(tokens) and tokens[end].pos[0] in ("接尾辞", "名詞") and not tokens[end].wh:
            end += 1
        if end > wh + 1:
            return "".join(t.surface for t in tokens[wh + 1 : end])
        if (
            wh + 2 < len(tokens)
            and tokens[wh + 1].surface in ("の", "という", "と言う")
            and tokens[wh + 2].pos[0] == "名詞"
        ):
            return tokens[wh + 2].surface
    i = (len(tokens) if wh is None else wh) - 1
    while i >= 0 and tokens[i].pos[0] in ("補助記号", "助詞", "助動詞"):
        i -= 1
    return tokens[i].surface if i >= 0 and tokens[i].pos[0] in ("名詞", "接尾辞") else ""


def question_slot(question: Analysis, own: frozenset[str] | None, evidence: list[tuple[int, Analysis]]) -> Slot | None:
    asked = _asked(question, own, evidence)
    if not asked:
        return None
    wh = next((i for i, t in enumerate(question.tokens) if t.wh), None)
    japanese = is_japanese(question.text)
    return Slot(
        asked=tuple(asked),
        anchors=_anchors(question),
        particle=_particle_after(question.tokens, wh + 1) if wh is not None else None,
        kind_noun=kind_noun(question) if japanese else "",
        naming=bool(_NAMING.search(question.text)),
        top_held=max(_held(evidence, n, len(s.tokens), asked) for n, (_, s) in enumerate(evidence)),
    )


def _clause(tokens: tuple[Token, ...], start: int, end: int) -> tuple[int, int]:
    """The clause around tokens[start:end]: up to a comma, a full stop or a conjunctive particle."""

    def boundary(t: Token) -> bool:
        return t.surface in ("、", "。", ",") or t.pos[:2] == ("助詞", "接続助詞")

    while start > 0 and not boundary(tokens[start - 1]):
        start -= 1
    while end < len(tokens) and not boundary(tokens[end]):
        end += 1
    return start, end


def place_signs(evidence: list[tuple[int, Analysis]], n: int, start: int, end: int, slot: Slot) -> dict[str, float]:
    """The signs (SLOT_WEIGHTS) that tokens[start:end] of sentence ``n`` fills the question's slot."""
    sentence = evidence[n][1]
    tokens = sentence.tokens
    asked = slot.asked
    held = _held(evidence, n, start, asked)
    # A reading or alias in brackets (…結婚すること(夫婦別姓)) stands where its owner stands.
    first = min(start, sentence.owners[start])
    weight = sum(w.rarity for w in asked)
    near = window = 0.0
    for word in asked:
        d = _distance(sentence, first, end, word.forms)
        if d is not None:
            near += word.rarity * word.near / (1.0 + d / SLOT_DECAY)
            window += word.rarity if d <= WINDOW else 0.0
    cs, ce = _clause(tokens, first, end)
    clause = {f for i in range(cs, ce) if not start <= i < end for f in tokens[i].forms}
    last = end
    while last < len(tokens) and attached(tokens[last]):
        last += 1
    left, right, echo = slot.anchors
    before = "".join(t.surface for t in tokens[max(0, first - 2) : first])
    after = "".join(t.surface for t in tokens[last : last + 3])
    around = "".join(t.surface for t in tokens[max(0, first - ECHO_TOKENS) : first])
    around += "".join(t.surface for t in tokens[last : last + ECHO_TOKENS])
    text = "".join(t.surface for t in tokens[start:last])
    named = slot.naming and (
        (first > 0 and tokens[first - 1].surface in ("「", "『"))
        or after.startswith(("と", "って"))
        or (start <= 1 and after.startswith(("は", "とは", "(")))
    )
    return {
        "held": held,
        "top": float(held >= slot.top_held - 1e-9),
        "near": near / sum(w.rarity * w.near for w in asked),
        "window": window / weight,
        "clause": sum(w.rarity for w in asked if not w.forms.isdisjoint(clause)) / weight,
        "echo": len(echo & _bigrams(around)) / len(echo) if echo else 0.0,
        "anchor_before": float(any(before.endswith(a) for a in left)),
        "anchor_after": float(any(after.startswith(a) for a in right)),
        "particle": float(slot.particle is not None and _particle_after(tokens, end) == slot.particle),
        "kind_noun": float(bool(slot.kind_noun) and text.endswith(slot.kind_noun[-1])),
        "naming": float(named),
    }


def _weighted(signs: dict[str, float], weights: dict[str, float]) -> float:
    return sum(weights[k] * v for k, v in signs.items())


@dataclass(frozen=True)
class SlotPlaces:
    """Where a bare answer, and every other phrase of its kind, stands in the evidence: one dict of
    signs (the keys of SLOT_WEIGHTS) per place, as the verifier weighed them.

    ``addressed`` says whether the evidence addresses the question at all (EVIDENCE_HELD). The
    verifier passes the answer when ``fills(SLOT_MARGIN)`` (SLOT_MARGIN_EN in English); other
    weights and margins can be tried on the same places.

    Example::

        >>> ev = [(1, "梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨入りは沖縄で5月10日ごろである。")]
        >>> question = "日本で梅雨がないのは北海道とどこか。"
        >>> slot_places("小笠原諸島です。", ev, question).fills(SLOT_MARGIN)
        True
        >>> slot_places("沖縄です。", ev, question).fills(SLOT_MARGIN)
        False
    """

    answer: tuple[dict[str, float], ...]
    rivals: tuple[dict[str, float], ...]
    addressed: bool

    def scores(self, weights: dict[str, float] | None = None) -> tuple[list[float], list[float]]:
        """The score of each of the answer's places and each rival place (SLOT_WEIGHTS by default)."""
        w = SLOT_WEIGHTS if weights is None else weights
        return [_weighted(s, w) for s in self.answer], [_weighted(s, w) for s in self.rivals]

    def fills(self, margin: float, weights: dict[str, float] | None = None) -> bool:
        """Does the answer fill the slot: the evidence addresses the question, and the answer's best
        place trails the best rival place by at most ``margin``?"""
        answer, rivals = self.scores(weights)
        return self.addressed and not max(answer) < max(rivals, default=-math.inf) - margin


def asks_for_slot(question: Analysis) -> bool:
    """Does the question ask for something it does not offer (not yes/no, not a choice)?"""
    if CHOICE.search(question.text):
        return False
    if any(t.wh for t in question.tokens):
        return True
    tokens = [t for t in question.tokens if t.pos[0] != "補助記号"]
    return bool(tokens) and tokens[-1].surface in ("は", "とは", "って", "が")
