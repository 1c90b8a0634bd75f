"""Relevance: does an answer address what its question asks about?

Supported is not enough (seed 004): a grounded sentence about another tax, another country's
ministers or the bus line's route answers nothing when the viewer asked about the consumption
tax, a statesman's country or the opening date. This check runs on the hot path, before an
answer is verified, and needs no model. Two things must hold (:mod:`kotae.language.question_focus` reads
them off the question):

- **kind**: when the question asks for a kind of answer with a wh-word (いつ, どこ, 誰, いくら,
  何人, when, where, how much …), a sentence of the answer gives one (a date or time, a place, a
  person, an amount, a count);
- **focus**: the terms it asks about are addressed. Each term is looked up in the answer's
  sentences (full credit), else in the titles of the blocks they cite (what the document is
  about: ``IN_TITLE``), else anywhere in those blocks (``IN_BLOCK``: the topic of a paragraph
  is often named once, sentences before). A term matches
  by its forms, its reading (ほちょうき meets 補聴器; never an English word: rice is not in
  "prices") or all of its short units (津波タワー meets 津波避難タワー); a number with the
  counter the question gives it (2歳 is not 2位). A compound whose head is there but not its
  modifier is another thing (消費税 is not 宿泊税; 初乗り運賃 is not 運賃) and gets no credit. The weighted share of
  the question's terms so addressed must reach ``MIN_COVERAGE``, and no term that picks out one
  thing (a name, a katakana word, a compound) may be missing from the evidence altogether.

A comment of several sentences is also answered when one sentence of it that asks (a kind,
a wh-word, yes/no, a question mark) is answered; a demand or a threat beside it is never judged
alone.

An English question over Japanese evidence cannot be matched word by word offline: then only
the kind is checked, and only an explicit one passes (the reason says so).

A comment may come with a second wording: the rewrite model's standalone question in ordinary
words (``CommentV1.rewrite``; it keeps every name and number of the comment). A colloquial
comment shares few words with the records (親父がテレビの音めっちゃ大きくしてて、耳のやつ高いって
買わないんよ) while its rewrite does (補聴器の購入補助はありますか): :func:`relevance_to_any`
accepts an answer that addresses either, and says which (``Relevance.wording``).

Example::

    >>> r = relevance("消費税は下げてくれるの？", ["宿泊税を1泊200円に引き下げます[1]。"], [("観光", "宿泊税を1泊200円に引き下げる。")])
    >>> r.relevant, r.missing
    (False, ('消費税',))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from kotae.citations import strip_markers
from kotae.language import lexicon
from kotae.language.question_focus import KIND_NAMES, FocusTerm, QuestionFocus, holds_kind, question_focus
from kotae.language.sentence_analysis import Analysis, analyse
from kotae.language.spelling import folded_in, nearest
from kotae.language.text import is_japanese, normalize, split_sentences

METHOD = "focus_and_kind"
#: Weighted share of the question's terms the answer must address.
MIN_COVERAGE = 0.5
#: Credit for a term found in the title of a cited block (what the whole document is about), not in
#: the answer's sentences.
IN_TITLE = 0.75
#: Credit for a term found elsewhere in a cited block, not in the answer's sentences or its title.
IN_BLOCK = 0.5
#: Credit for a compound whose modifier starts a phrase with another head (県庁ビル ~ 県庁舎), or a
#: word found only inside a longer phrase (待機 of 待機児童).
HEAD_CHANGED = 0.4
#: Credit for a compound whose parts are all there, but apart (ベルギーの独立 for ベルギー独立).
APART = 0.8
#: Largest weighted share of the question's terms that may be absent from the evidence altogether:
#: one term of a long question may be paraphrased; the one thing a short question names may not,
#: and neither may a proper name.
MAX_ABSENT = 0.34


@dataclass(frozen=True)
class TermMatch:
    """How one focus term was found: ``credit`` 1 in the answer, ``IN_TITLE`` in a cited block's
    title, ``IN_BLOCK`` elsewhere in its evidence, 0 nowhere; ``note`` says what stands there
    instead when something does."""

    term: FocusTerm
    credit: float
    where: str  # "answer", "title", "evidence" or "nowhere"
    note: str = ""


@dataclass(frozen=True)
class Relevance:
    """The relevance decision on one answer, with what it rests on."""

    relevant: bool
    reasons: list[str] = field(default_factory=list)
    coverage: float = 1.0
    missing: tuple[str, ...] = ()  # terms the evidence never mentions
    unfilled: tuple[str, ...] = ()  # kinds asked for that the answer does not give
    matches: tuple[TermMatch, ...] = ()
    method: str = METHOD
    wording: str | None = None  # the second wording of the question this decision is about; None: the comment

    @property
    def reason(self) -> str:
        """One line for an ``unanswered`` outcome: what the answer left out."""
        return "; ".join(self.reasons) if self.reasons else "addresses the question"


@dataclass(frozen=True)
class _Text:
    """What a term is looked up in: the noun phrases, words, text and reading of some sentences."""

    phrases: tuple[str, ...]
    words: frozenset[str]
    text: str
    reading: str
    counted: frozenset[str]  # each number with its counter: 2歳, 100000人

    @classmethod
    def of(cls, analyses: list[Analysis]) -> _Text:
        return cls(
            tuple(dict.fromkeys(t.text.lower() for a in analyses for t in a.terms if t.kind != "number")),
            frozenset(w for a in analyses for w in a.words),
            "\n".join(a.text.lower() for a in analyses),
            "".join(a.reading for a in analyses),
            frozenset(f"{n}{_unit(c)}" for a in analyses for n, c in _counters(a).items()),
        )


def _unit(counter: str) -> str:
    """What a counter counts, by its first character: 2歳 is counted as 0〜2歳児 is, and 3か月 as 3ヶ月."""
    return {"ヶ": "か", "ケ": "か", "カ": "か", "箇": "か"}.get(counter[0], counter[0])


@lru_cache(maxsize=4096)
def _asked_counters(question: str) -> dict[str, str]:
    """The counters of the question's numbers (read once a question, for every term and text)."""
    return _counters(analyse(question))


def _counters(analysis: Analysis) -> dict[str, str]:
    """Each number of ``analysis`` that a counter follows, with the counter (2歳 → {"2": "歳"}).
    Not the general counter つ: 一つ挙げよ asks for one example, and an answer counts in its own units."""
    tokens = analysis.tokens
    return {
        t.number: after.surface
        for t, after in zip(tokens, tokens[1:], strict=False)
        if t.number and after.pos[:2] == ("接尾辞", "名詞的") and after.surface != "つ"
    }


_OPTIONAL_HEADS = lexicon.words("relevance_optional_heads")


def _heard(term: FocusTerm, where: _Text, least: int) -> bool:
    """A Japanese term's reading, at least ``least`` kana long, is read in ``where`` (ほちょうき
    meets 補聴器). Never an English word: rice is not heard in "prices"."""
    return len(term.reading) >= least and is_japanese(term.reading) and term.reading in where.reading


def _kana_found(term: FocusTerm, where: _Text) -> bool:
    """A kana spelling of a kanji word (ほちょうき): the run it is part of is read in ``where``."""
    return any(run in where.reading for run in term.kana_runs)


def _match_word(text: str, where: _Text) -> tuple[float, str]:
    """A one-word term: a phrase that is it, or ends with it (タクシー of デマンド乗合タクシー), is a
    match; a phrase that only starts with it or holds it inside (待機 of 待機児童) names another thing."""
    inside = ""
    for phrase in where.phrases:
        if phrase == text or phrase.endswith(text):
            return 1.0, ""
        if text in phrase and not inside:
            inside = phrase
    if inside:
        return HEAD_CHANGED, f"only inside {inside!r}"
    return (1.0, "") if text in where.words else (0.0, "")


def _match_compound(parts: list[str], where: _Text) -> tuple[float, str, bool]:
    """A compound (消費税 = 消費 + 税): every part there (in one phrase, or apart: 交通費を…補助) is a
    match; its head in a phrase with a modifier of its own, and its modifier nowhere, is another
    thing (宿泊税 for 消費税); its modifiers with another head a near one (県庁舎 for 県庁ビル).
    The third value says "another thing"."""
    together = [ph for ph in where.phrases if all(p in ph for p in parts)]
    if together:
        return 1.0, "", False
    # Apart, each part must be a word of its own there, or the head of a phrase (バス of
    # コミュニティバス: a kind of bus is still a bus, as for a one-word term); a one-character
    # part, inside a phrase with another part (交通費を…補助する), or 税 anywhere would do.
    found = [
        p in where.words or any(w.endswith(p) for w in where.words) or any(ph.endswith(p) for ph in where.phrases)
        if len(p) > 1
        else any(p in ph and any(q in ph for q in parts if q != p) for ph in where.phrases)
        for p in parts
    ]
    if all(found):
        return 1.0, "", False
    head, modifiers = parts[-1], parts[:-1]
    if not any(found[:-1]):
        other = next(
            (
                ph
                for ph in where.phrases
                if ph.endswith(head) and len(ph) > len(head) and not any(m in ph for m in modifiers)
            ),
            "",
        )
        if other:
            return 0.0, f"the evidence has {other!r}", True
    modifier = "".join(parts[:-1])
    # A one-character modifier (県, 市, 新) begins too many phrases to make one of them near: 県職員 is not 県内.
    near = next((ph for ph in where.phrases if ph.startswith(modifier) and len(ph) > len(modifier)), "")
    near = near if len(modifier) > 1 else ""
    if near:
        return HEAD_CHANGED, f"the evidence has {near!r}", False
    return 0.0, "", False


def _match_in(focus: QuestionFocus, term: FocusTerm, where: _Text) -> tuple[float, str]:
    """Credit of ``term`` in ``where`` (1, HEAD_CHANGED or 0), and a note on what stands there instead."""
    text = term.text.lower()
    counter = _asked_counters(focus.text).get(term.text) if term.kind == "number" else None
    if counter:
        # A number is found with the counter the question gives it: 2歳 is not in 2位.
        return (1.0, "") if f"{term.text}{_unit(counter)}" in where.counted else (0.0, "")
    if text in where.phrases or text in where.words:
        return 1.0, ""
    # By sound only a word: 20 read ニレイ is not in 2030 read ニレイサンレイ.
    if term.kind != "number" and (_heard(term, where, 3) or _kana_found(term, where)):
        return 1.0, ""
    if term.kind != "number" and (nearest(term.text, where.words) or folded_in(term.text, where.text)):
        return 1.0, ""  # a typing slip of a word there (モッフパッド for モップパッド)
    parts = [p.lower() for p in term.parts]
    if len(parts) > 1 and parts[-1] in _OPTIONAL_HEADS:
        # バス代 without 代 (バスの運賃): found, but not as the very compound asked about.
        credit, note = _match_in_parts(parts[:-1], where)
        return min(credit, APART), note
    return _match_in_parts(parts or [text], where)


def _match_in_parts(parts: list[str], where: _Text) -> tuple[float, str]:
    if len(parts) > 1:
        credit, note, _ = _match_compound(parts, where)
        return credit, note
    return _match_word(parts[0], where)


def _match(
    focus: QuestionFocus, term: FocusTerm, answer: _Text, titles: _Text, blocks: _Text, titled_answer: _Text
) -> TermMatch:
    credit, note = _match_in(focus, term, answer)
    if credit >= 1.0:
        return TermMatch(term, 1.0, "answer")
    if len(term.parts) > 1 and credit < APART and _match_in(focus, term, titled_answer)[0] >= 1.0:
        # A compound said across the answer and the title of what it cites: バス路線 as 新路線 in a
        # document titled コミュニティバス運賃と新路線. Only a part in the answer itself counts.
        if any(p.lower() in answer.text for p in term.parts):
            return TermMatch(term, APART, "answer", "with the cited document's title")
    titled, _ = _match_in(focus, term, titles)
    elsewhere, note_elsewhere = _match_in(focus, term, blocks)
    best = max(credit, titled * IN_TITLE, elsewhere * IN_BLOCK)
    if best > credit:
        return TermMatch(term, best, "title" if best == titled * IN_TITLE else "evidence", note_elsewhere)
    return TermMatch(term, credit, "answer" if credit else "nowhere", note or note_elsewhere)


def _other_things(focus: QuestionFocus, blocks: _Text) -> list[str]:
    """Compounds asked about whose head the evidence has only with another modifier (消費税 → 宿泊税)."""
    out = []
    for term in focus.terms:
        parts = [p.lower() for p in term.parts]
        if len(parts) > 1 and parts[-1] in _OPTIONAL_HEADS:
            parts = parts[:-1]
        # Said as the evidence says it (臨界鉄道 for 臨海鉄道, both リンカイテツドウ): a slip of the
        # kana-to-kanji conversion, the same thing.
        if len(parts) > 1 and term.text.lower() not in blocks.text and not _heard(term, blocks, 4):
            _, note, other = _match_compound(parts, blocks)
            if other:
                out.append(f"asked about {term.text!r}, which the evidence does not mention ({note})")
    return out


def _owned(analysis: Analysis) -> list[tuple[str, str]]:
    """Each (X, Y) of ``analysis`` written X の Y, two noun phrases: X says whose or which Y it is
    (not when a wh-word asks for X: どの程度の距離 asks how far, どこの国の首都 which country)."""
    terms = [t for t in analysis.terms if t.kind != "number"]
    return [
        (x.text.lower(), y.text.lower())
        for x, y in zip(terms, terms[1:], strict=False)
        if [t.surface for t in analysis.tokens[x.end : y.start]] == ["の"]
        and not any(t.wh for t in analysis.tokens[max(0, x.start - 2) : x.start])
    ]


def _other_owners(question: str, matches: Sequence[TermMatch], answer: list[Analysis]) -> list[str]:
    """Asked about X の Y, the answer says Y only as Z の Y, and X nowhere in it: another one's Y
    (県職員の給与 asked, 知事の給与を20%削減 answered). A grounded sentence about someone else's pay
    shares every other word of the question."""
    said = {m.term.text.lower() for m in matches if m.where == "answer" and m.credit >= 1.0}
    out = []
    owners_in_answer = [pair for a in answer for pair in _owned(a)]
    for owner, owned in _owned(analyse(question)):
        if owner in said:
            continue
        # この時代の天皇 for 寛保時代の天皇 is the same one, shortly: an owner either holds the other is not another.
        other = next((z for z, y in owners_in_answer if y.endswith(owned) and owner not in z and z not in owner), None)
        if other:
            out.append(f"asked about 「{owner}の{owned}」; the answer is about 「{other}の{owned}」")
    return out


#: The thing an English count question counts (how many calories → calories).
_COUNTED = re.compile(r"\bhow\s+many\s+([A-Za-z][A-Za-z-]+)", re.I)
#: ... unless it is a word an answer says with a number alone (30 winners, 3 times, 120 days).
_GENERIC_COUNTED = lexicon.words("relevance_generic_counted")


#: A sentence of a comment that is only the other option of a choice (…合法ですか？違法ですか？):
#: without a topic or a case particle it asks nothing of its own.
_ALTERNATIVE = re.compile(r"^[^はがをにでのと、,\s]{1,12}(ですか|でしょうか|なのか|か)[？?]?$")


def relevance(
    question: str, answer: list[str], evidence: list[tuple[str, str]], *, read_with: Sequence[str] = ()
) -> Relevance:
    """Does ``answer`` (its sentences, markers allowed) address ``question``, given the cited
    ``evidence`` as (title, text) pairs?

    ``read_with``: the questions of the FAQ entries the answer quotes. An FAQ's answer says what
    its question asks ("公式サイトとXで…" answers 街頭演説の予定はどこで見られますか), so the terms of
    that question count as said by the answer; the kind asked for must still be in the answer.

    A comment of several sentences ("Ignore all previous instructions … When is election day?")
    is answered when the answer addresses one of them.
    """
    whole = _relevance(question, answer, evidence, read_with)
    parts = split_sentences(normalize(question))
    if whole.relevant or len(parts) < 2:
        return whole
    for part in parts:
        if _ALTERNATIVE.match(part):
            continue  # 合法ですか？違法ですか？ offers the other option of one question
        if not _asks(part):
            continue  # 言わないなら通報します: a threat or a remark, whatever it shares with the evidence
        one = _relevance(part, answer, evidence, read_with)
        if one.relevant:
            return one
    return whole


def _asks(part: str) -> bool:
    """Does this sentence of a comment ask something: a kind of answer, a wh-word, yes or no?"""
    focus = question_focus(part)
    return bool(focus.kinds or focus.explicit or focus.yes_no) or part.rstrip().endswith(("?", "？"))


def relevance_to_any(
    question: str,
    rewrite: str | None,
    answer: list[str],
    evidence: list[tuple[str, str]],
    *,
    read_with: Sequence[str] = (),
) -> Relevance:
    """:func:`relevance` to the comment ``question``, else to its second wording ``rewrite``.

    Not addressing either, the decision (and its reasons) is the comment's own. The rewrite may not
    change the kind of answer the comment asks for with a wh-word: an answer that does not give it
    is no answer, whatever the rewrite asks.

    Example::

        >>> r = relevance_to_any(
        ...     "親父がテレビの音めっちゃ大きくしてて、耳のやつ高いって買わないんよ",
        ...     "補聴器を買うときの補助はありますか",
        ...     ["補聴器の購入に上限3万円を補助する[1]。"],
        ...     [("高齢者", "補聴器の購入に上限3万円を補助する。")],
        ... )
        >>> r.relevant, r.wording
        (True, '補聴器を買うときの補助はありますか')
    """
    own = relevance(question, answer, evidence, read_with=read_with)
    if own.relevant or not rewrite or rewrite == question or own.unfilled:
        # The rewrite may reword what is asked about, never the kind of answer the viewer asked for
        # (いくらかかる reworded as どのくらい would take 1機 for an answer).
        return own
    second = relevance(rewrite, answer, evidence, read_with=read_with)
    return replace(second, wording=rewrite) if second.relevant else own


def _relevance(
    question: str, answer: list[str], evidence: list[tuple[str, str]], read_with: Sequence[str]
) -> Relevance:
    focus = question_focus(question)
    sentences = [strip_markers(s) for s in answer if strip_markers(s)]
    reasons: list[str] = []
    kinds = focus.kinds if focus.explicit or focus.lang == "en" else ()
    # Asked who the governor is, 知事 in 知事の給与を… names nobody: the question's own terms do not fill it.
    asked = frozenset(t.text for t in focus.terms if t.kind != "number" and len(t.text) > 1)
    unfilled = tuple(k for k in kinds if not any(holds_kind(k, s, besides=asked) for s in sentences))
    if unfilled:
        reasons.append(f"asked for {' and '.join(KIND_NAMES[k] for k in unfilled)}; the answer gives none")
    said = " ".join(sentences)
    titles = [analyse(t) for t, _ in evidence if t]
    answer_text = _Text.of([analyse(s) for s in [*sentences, *read_with]])
    title_text = _Text.of(titles)
    if focus.lang == "en" and said and is_japanese(said):
        return _across_languages(focus, answer_text, reasons, unfilled)
    block_text = _Text.of([a for _, text in evidence for a in _sentences(text)])
    titled_answer = _Text.of([*(analyse(s) for s in sentences), *titles])
    matches = tuple(_match(focus, t, answer_text, title_text, block_text, titled_answer) for t in focus.terms)
    weight = sum(m.term.weight for m in matches)
    coverage = sum(m.term.weight * m.credit for m in matches) / weight if weight else 1.0
    absent = [m for m in matches if m.where == "nowhere" and m.term.specific]
    missing = tuple(m.term.text for m in absent)
    # Another thing only if neither the evidence nor its titles have the modifier (バス of バス路線).
    others = _other_things(focus, _Text.of([*titles, *(a for _, text in evidence for a in _sentences(text))]))
    others += _other_owners(question, matches, [analyse(s) for s in sentences])
    names = [m for m in absent if m.term.kind in ("person", "org", "name")]
    # What "how many …" counts must be there: a count of pieces is not a count of calories.
    counted = _COUNTED.search(question)
    if counted and counted.group(1).lower() not in _GENERIC_COUNTED:
        names += [m for m in absent if m.term.text.lower() == counted.group(1).lower() and m not in names]
    too_many = bool(absent) and sum(m.term.weight for m in absent) > MAX_ABSENT * weight
    # What it asks about named only in other sentences of the evidence: the answer quotes a sentence
    # about something else that merely shares a number or a word with it (ドクターヘリ … 1回 ← 妊婦の交通費 1回).
    named = [m for m in matches if m.term.specific and m.term.kind != "number"]
    if named and all(m.where not in ("answer", "title") and not _partly_in(m.term, answer_text) for m in named):
        elsewhere = [m.term.text for m in named if m.where == "evidence"]
        if elsewhere:
            reasons.append(
                f"names none of what the question asks about ({', '.join(elsewhere)}: only elsewhere in the evidence)"
            )
    if reasons or others or names or too_many or coverage < MIN_COVERAGE:
        # Not an answer: say what it leaves out, by name.
        reasons += others
        named = " ".join(others)
        counters = _asked_counters(focus.text)  # a number is named with its counter: '2歳'
        reasons += [
            f"asked about {m.term.text + (counters.get(m.term.text, '') if m.term.kind == 'number' else '')!r}, "
            "which the evidence does not mention"
            for m in absent
            if repr(m.term.text) not in named
        ]
        if coverage < MIN_COVERAGE:
            partly = [m.term.text for m in matches if 0 < m.credit < 1.0]
            reasons.append(
                f"addresses {coverage:.0%} of what the question asks about"
                + (f" (only in part: {', '.join(partly)})" if partly else "")
            )
    return Relevance(not reasons, reasons, coverage, missing, unfilled, matches)


def _across_languages(focus: QuestionFocus, answer: _Text, reasons: list[str], unfilled: tuple[str, ...]) -> Relevance:
    """An English question over Japanese evidence: words cannot be matched offline, numbers can."""
    if not focus.kinds:
        reasons.append("an English question over Japanese evidence: only an explicit kind of answer can be checked")
    lost = _numbers_not_in(focus, answer)
    if lost:
        reasons.append(f"asked about {', '.join(lost)}, which the answer does not mention")
    return Relevance(not reasons, reasons, unfilled=unfilled, missing=tuple(lost))


def numbers_not_said(question: str, sentences: list[str]) -> list[str]:
    """The numbers ``question`` names that none of ``sentences`` says (100,000 is said by 10万)."""
    return _numbers_not_in(question_focus(question), _Text.of([analyse(strip_markers(s)) for s in sentences]))


def _numbers_not_in(focus: QuestionFocus, where: _Text) -> list[str]:
    # Sudachi reads 10万 as 100000; an English question writes 100,000.
    return [t.text for t in focus.terms if t.kind == "number" and t.text.replace(",", "") not in where.words]


def _partly_in(term: FocusTerm, where: _Text) -> bool:
    """A part of a compound asked about is said there (路線 of バス路線 in 新路線を開設)."""
    return len(term.parts) > 1 and any(len(p) > 1 and p.lower() in where.text for p in term.parts)


def _sentences(text: str) -> list[Analysis]:
    return [analyse(s) for s in split_sentences(normalize(text))]
