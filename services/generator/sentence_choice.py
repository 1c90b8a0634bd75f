"""Which evidence sentences answer the question: the ones that fill its slot, and only those.

The extractive generator quotes sentences; quoting the ones that share the most words with the
question answers "When does the new bus line open?" with the bus line's route. Here every
sentence of the evidence (in the comment's language) is weighed by

- **its relevance** (:mod:`kotae.language.relevance`): it gives the kind of answer asked for (a date for
  when, an amount for how much …) and addresses the terms asked about. A sentence that does not
  is never chosen;
- **the slot** (:mod:`kotae.language.answer_slot`): the best place any phrase of the asked kind holds in
  it, as the verifier weighs a bare answer — how much of the question surrounds it, whether the
  words and particle next to the wh-word recur next to it, whether it is the kind the question
  names;
- **the words it shares with the question**, by rarity in the evidence, and the rank of its block.

The best one is the answer; when it restates the question without naming its subject
(〇〇な国は → "…の注目を集めている"), the answer is what its document is about, and the
document's title goes before it as a label (【ラオス】). A second sentence is added only when it adds to the answer: it
gives a kind of answer the first does not (いつから？何人目から？), or, for a question without a
wh-word, it addresses terms of the question the first leaves out; or the first restates the
question and the next sentence of its block, which leaves its subject to the first, fills the
slot (…期間が出現することがある。この期間のことを梅雨の中休みという), or a keyword that implies
its kind (宿泊税: an amount) finds it only in the next sentence of the same item; or a question written
across two sentences of a passage finds its answer in the neighbour of the best one — the sentence
before one that points back (これを受け…), or the one after that goes on from it (一方、…) — when
the two together hold terms of the question the best one lacks. When no sentence is relevant
there is nothing to quote, and the reason says what was missing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kotae.citations import Block, faq_question
from kotae.language import lexicon
from kotae.language.answer_slot import SLOT_WEIGHTS, Slot, asks_for_slot, place_signs, question_slot
from kotae.language.question_focus import QuestionFocus, holds_kind, question_focus
from kotae.language.relevance import Relevance, relevance
from kotae.language.sentence_analysis import Analysis, analyse, counter
from kotae.language.text import is_japanese, search_tokens

#: How much a sentence's relevance coverage counts against the slot score (whose weights sum to ~6).
COVERAGE_WEIGHT = 3.0
#: How much the words it shares with the question count (IDF-weighted share, 0-1).
OVERLAP_WEIGHT = 1.0
#: Each later block costs this much, so better-ranked evidence wins ties.
RANK_COST = 0.15


@dataclass(frozen=True)
class Candidate:
    """One sentence of the evidence, weighed."""

    block: Block
    sentence: str
    order: int  # block order, then sentence order
    relevance: Relevance
    slot: float
    overlap: float

    @property
    def score(self) -> float:
        return (
            self.slot
            + COVERAGE_WEIGHT * self.relevance.coverage
            + OVERLAP_WEIGHT * self.overlap
            - RANK_COST * (self.block.n - 1)
        )


@dataclass(frozen=True)
class Choice:
    """The sentences to quote (best first), or none and why; ``label``: the title of the first
    one's document, when the sentence restates the question and leaves its subject unnamed;
    ``joined``: the first two are one answer (a restating sentence and the one that fills its
    slot, or two a question is written across), so neither is quoted without the other."""

    chosen: list[Candidate]
    reason: str = ""
    label: str = ""
    joined: bool = False


#: Share of the question's terms a sentence must hold to count as restating it.
RESTATES = 0.8
#: The next sentence of a restating one continues it when its slot score is at least this share of the first's.
CONTINUES = 0.5
#: The same share for a next sentence that points back to the restating one (これを…という).
CONTINUES_BACK = 0.25


def _subject_label(question: str, best: Candidate) -> str:
    """The block's title, when ``best`` restates a question that asks for something (〇〇な国は,
    …と呼ばれるのは) without naming its own subject: then the answer is what the document is about."""
    title = best.block.title.strip()
    if not title or title in question or title in best.sentence or best.block.kind != "doc" or not is_japanese(title):
        return ""
    named = analyse(title).terms
    if len(named) != 1 or named[0].kind == "number" or len(named[0].text) < len(title) - 1:
        return ""  # a heading (子育て支援：保育料と…), not the name of what the document is about
    focus = question_focus(question)
    if any(k in ("amount", "count", "time", "quantity") for k in focus.kinds):
        return ""  # asks for a number, which a name does not give
    if not asks_for_slot(analyse(question)) or best.relevance.coverage < RESTATES:
        return ""
    return title


def _overlaps(question: str, sentences: list[str]) -> list[float]:
    """IDF-weighted share of the question's words each sentence holds."""
    q = set(search_tokens(question))
    token_sets = [set(search_tokens(s)) for s in sentences]
    df: dict[str, int] = {}
    for toks in token_sets:
        for t in toks:
            df[t] = df.get(t, 0) + 1
    n = max(1, len(sentences))
    idf = {t: math.log(1 + n / df.get(t, 0.5)) for t in q}
    total = sum(idf.values()) or 1.0
    return [sum(idf[t] for t in q & toks) / total for toks in token_sets]


def _fills(focus: QuestionFocus, sentence: Analysis, start: int, end: int) -> bool:
    """Is tokens[start:end] (with its counter) a phrase of a kind the question asks for?"""
    if not focus.kinds or not focus.explicit:
        return True
    text = "".join(t.surface for t in sentence.tokens[start:end]) + counter(sentence, end)
    return any(holds_kind(k, text) for k in focus.kinds)


def _slot_scores(focus: QuestionFocus, question: Analysis, evidence: list[tuple[int, Analysis]]) -> list[float]:
    """For each sentence of ``evidence``, the best score of a place in it that fills the question's slot."""
    slot: Slot | None = question_slot(question, None, evidence) if evidence else None
    if slot is None:
        return [0.0] * len(evidence)
    asked = {t.text for t in question.terms}
    out = []
    for n, (_, sentence) in enumerate(evidence):
        best = 0.0
        for t in sentence.terms:
            if t.text in asked or not _fills(focus, sentence, t.start, t.end):
                continue
            signs = place_signs(evidence, n, t.start, t.end, slot)
            best = max(best, sum(SLOT_WEIGHTS[k] * v for k, v in signs.items()))
        out.append(best)
    return out


def weigh(question: str, sentences: list[tuple[Block, str]]) -> list[Candidate]:
    """Every (block, sentence) weighed for ``question``, in evidence order."""
    focus = question_focus(question)
    analyses = [analyse(s) for _, s in sentences]
    slots = _slot_scores(focus, analyse(question), [(b.n, a) for (b, _), a in zip(sentences, analyses, strict=True)])
    overlaps = _overlaps(question, [s for _, s in sentences])
    out = []
    for order, ((block, sentence), slot, overlap) in enumerate(zip(sentences, slots, overlaps, strict=True)):
        rel = relevance(question, [sentence], [(block.title, block.text)], read_with=faq_question(block))
        out.append(Candidate(block, sentence, order, rel, slot, overlap))
    return out


def _adds(focus: QuestionFocus, first: Candidate, other: Candidate) -> bool:
    """Does ``other`` add to ``first``: a place that fills the slot better (``first`` won on what it
    covers), a kind of answer it lacks, or terms asked about that it leaves out?"""
    if other.slot > first.slot:
        return True
    if focus.explicit and focus.kinds:
        # Another kind it asks for (何人目から？いつから？), or another figure of the kind asked for
        # about the same things (0〜2歳児は1万5千円, 第2子以降は無料).
        return any(
            holds_kind(k, other.sentence)
            and (not holds_kind(k, first.sentence) or other.relevance.coverage >= first.relevance.coverage)
            for k in focus.kinds
        )
    mine = {m.term.text for m in first.relevance.matches if m.credit >= 1.0}
    theirs = {m.term.text for m in other.relevance.matches if m.credit >= 1.0}
    return bool(theirs - mine)


def choose(question: str, sentences: list[tuple[Block, str]], *, max_sentences: int) -> Choice:
    """The sentences that answer ``question`` best, at most ``max_sentences``."""
    candidates = weigh(question, sentences)
    relevant = sorted((c for c in candidates if c.relevance.relevant), key=lambda c: (-c.score, c.order))
    if not relevant:
        if not candidates:
            return Choice([], "no evidence in the comment's language")
        best = max(candidates, key=lambda c: (c.relevance.coverage, c.score))
        return Choice([], f"no sentence of the evidence answers it: {best.relevance.reason}")
    focus = question_focus(question)
    chosen = [relevant[0]]
    continued = _continuation(question, candidates, chosen[0])
    follow = continued or _neighbour(question, candidates, chosen[0])
    if follow is not None and max_sentences > 1:
        chosen.append(follow)
    # A restating sentence and the one that fills its slot are one answer; so is a neighbour
    # to a best sentence that holds too little of the question to answer alone.
    joined = len(chosen) > 1 and (continued is not None or chosen[0].relevance.coverage < RESTATES)
    for cand in relevant[1:]:
        if len(chosen) >= max_sentences:
            break
        if cand not in chosen and _adds(focus, chosen[0], cand) and cand.score >= 0.5 * chosen[0].score:
            chosen.append(cand)
    return Choice(chosen, label=_subject_label(question, chosen[0]), joined=joined)


#: A sentence that opens a new item of a list or a section: (2) …, ・…, ②…, 【政策】….
_NEW_ITEM = re.compile(r"^[\(（]?[0-9０-９]+[\)）.]|^[・●■◆※【]|^[①-⑳]")


def _gives_the_implied_kind(focus: QuestionFocus, first: Candidate, follow: Candidate) -> bool:
    """A keyword that names its kind (宿泊税, バス代: an amount) is answered by the sentence that
    introduces it and the next one of the same item, when only that one gives the kind
    (…宿泊税を導入する。税額は1人1泊200円。): the viewer typing a fee wants the figure."""
    if focus.explicit or not focus.kinds or _NEW_ITEM.match(follow.sentence):
        return False
    return not any(holds_kind(k, first.sentence) for k in focus.kinds) and any(
        holds_kind(k, follow.sentence) for k in focus.kinds
    )


#: A sentence that opens by pointing back (これを受け…, その結果…) leans on the one before it.
_POINTS_BACK = re.compile("^(" + lexicon.alternation("choice_points_back") + ")")
#: A sentence that opens so (一方、…, 例えば…) goes on from the one before it.
_GOES_ON = re.compile("^(" + lexicon.alternation("choice_goes_on") + ")")


def _terms_held(candidate: Candidate) -> set[str]:
    return {m.term.text for m in candidate.relevance.matches if m.credit >= 1.0}


def _neighbour(question: str, candidates: list[Candidate], first: Candidate) -> Candidate | None:
    """The sentence next to ``first`` in its block that it cannot do without, when the two together
    hold terms of the question ``first`` lacks and address the question.

    A question written across two sentences of a passage asks about one and finds its answer in
    the other: 「…1994年に起きた事件とは」 is answered by the sentence before 「これを受け1999年には…」,
    「5月下旬から6月上旬ごろ東日本の陽気は」 by the one after 「5月下旬から6月上旬ごろになると…」,
    which goes on 「一方、…東日本では…春のような天気が続く」. Alone, each of those is about
    something else; quoted with ``first``, it is the answer.
    """
    if _POINTS_BACK.match(first.sentence):
        other = next((c for c in candidates if c.order == first.order - 1 and c.block.n == first.block.n), None)
    else:
        other = next((c for c in candidates if c.order == first.order + 1 and c.block.n == first.block.n), None)
        if other is not None and not (_POINTS_BACK.match(other.sentence) or _GOES_ON.match(other.sentence)):
            return None
    if other is None or not _terms_held(other) - _terms_held(first):
        return None
    pair = sorted((first, other), key=lambda c: c.order)
    together = relevance(
        question,
        [c.sentence for c in pair],
        [(first.block.title, first.block.text)],
        read_with=faq_question(first.block),
    )
    return other if together.relevant and together.coverage > first.relevance.coverage else None


def _continuation(question: str, candidates: list[Candidate], first: Candidate) -> Candidate | None:
    """The sentence right after ``first`` in its block, when ``first`` restates the question, the next
    one fills its slot about as well (or gives the kind asked for that ``first`` lacks), and the two
    together address the question.

    A question written from a passage restates one sentence and asks what the next one says
    (…期間が出現することがある。この期間のことを梅雨の中休みという): the next sentence leaves its
    subject to the first, so alone it names nothing asked about, and quoted after it, it is the answer.
    """
    follow = next((c for c in candidates if c.order == first.order + 1 and c.block.n == first.block.n), None)
    if follow is None or first.relevance.coverage < RESTATES:
        return None
    focus = question_focus(question)
    if _gives_the_implied_kind(focus, first, follow):
        return follow
    # One that points back (それらを深層Webと呼ぶ) holds the question's words only through
    # ``first``, so the signs of its slot, which count words near the place, read low.
    if follow.slot < (CONTINUES_BACK if _POINTS_BACK.match(follow.sentence) else CONTINUES) * first.slot:
        return None
    if focus.explicit and focus.kinds:
        # Asked for a kind (いつ, いくら): only when the first does not give it and the next does.
        if any(holds_kind(k, first.sentence) for k in focus.kinds):
            return None
        if not any(holds_kind(k, follow.sentence) for k in focus.kinds):
            return None
    together = relevance(
        question,
        [first.sentence, follow.sentence],
        [(first.block.title, first.block.text)],
        read_with=faq_question(first.block),
    )
    return follow if together.relevant else None
