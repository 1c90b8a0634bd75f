"""Aligned support: is each name, number and term of a claim in its evidence, *in the same relation*?

A bag-of-words check passes a sentence whose words are all in the evidence even when
one entity has been swapped for another from the next sentence ("X was founded by B"
when the evidence says A founded X and B joined later). Here every key term of a claim
— a number, a proper name, a noun phrase — is looked up in the sentences of the
evidence it cites, and an occurrence only counts when the words around it in the
claim are also around it in the evidence (a window of content words). Each
occurrence in the evidence supports one occurrence in the claim.

A claim too short to carry its own context (``小笠原諸島です。``) is checked against the
question it answers instead. Every place in the evidence that the answer, or another phrase
of its kind (a person, a place, another name, a number with the same counter, a common
noun), fills is scored by a weighted sum of signs that it fills the slot the question asks
about: how much of the question its sentence and its clause hold, how closely the
question's words (rare ones, and those near the wh-word, weigh more) surround it, whether
the words and the case particle next to the wh-word (北海道と｜どこ, 何を営む) recur next to
it, whether it is the kind of thing the question names (何暦 → 小暦), and, for "何という"
questions, whether it stands where a name is given. The evidence must address the
question, and the answer's best place must score at least about as well as every other
phrase's. An answer that only repeats the question, or says nothing (``ものです``), fills
no slot. Parenthesised readings and aliases are not rivals, and a sentence that refers
back (これ, 後者 …) also holds the words of the sentence before it.

Findings are typed so the verifier can classify them: a term that is in the evidence
but not in this relation contradicts it (class 1); a number or term that is nowhere in
the evidence is unsupported (class 2); a person, organisation or other proper name that
is nowhere in the evidence is invented (class 3).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kotae.language.answer_slot import (
    EVIDENCE_HELD,
    SLOT_MARGIN,
    SLOT_MARGIN_EN,
    SlotPlaces,
    asks_for_slot,
    is_alias,
    place_signs,
    question_slot,
)
from kotae.language.sentence_analysis import (
    Analysis,
    Term,
    analyse,
    counter,
    evidence_sentences,
    phrase_type,
    same_term,
)
from kotae.language.text import is_japanese

# How many content words either side of a term make its context in a claim, and in the evidence.
CLAIM_WINDOW = 4
EVIDENCE_WINDOW = 6
# Share of a term's claim context that must surround it in the evidence.
CONTEXT_SUPPORT = 0.5
# Share of a claim's words one evidence sentence must hold for the claim to count as restating it.
RESTATED = 0.7
# How sure a common noun missing from the evidence makes its finding: a paraphrase may use another word.
PARAPHRASE_DOUBT = 0.5
# By how much (in slot score, beyond the margin) a bare answer's place must trail a rival's for
# the finding to be sure; nearer the margin it is a weak one.
SLOT_SURE = 1.5
# A claim with no predicate of its own and at most this many content words leans on the question.
SHORT_CLAIM = 6


# --- alignment ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One problem with one term of a claim."""

    cls: int  # 1 contradicts, 2 not in the evidence, 3 invented
    term: str
    kind: str
    evidence: str | None = None  # the evidence sentence where the term was found in another relation
    block: int | None = None
    claim: str = ""  # the claim (answer sentence, markers stripped) the term belongs to
    reason: str = ""  # what is wrong, when it is not where the term is (or is not) in the evidence
    # How sure the finding is, 0-1: 1 for a term that is not there, in another sentence, or with
    # another counter; less for a term whose neighbours only partly recur around it, and for a
    # bare answer whose place trails a rival's only by a little.
    strength: float = 1.0

    def describe(self, refs: str) -> str:
        if self.reason:
            return f"{self.term!r} {self.reason}"
        if self.cls == 1:
            return f"{self.term!r} is in {refs} but not in this relation (evidence: {self.evidence!r})"
        if self.kind == "number":
            return f"number {self.term} not in {refs}"
        if self.cls == 3:
            return f"{self.kind} {self.term!r} appears nowhere in {refs}"
        return f"{self.term!r} not in {refs}"


@dataclass
class _Occurrence:
    block: int
    sentence: Analysis
    start: int
    end: int


def _occurrences(term: Term, evidence: list[tuple[int, Analysis]]) -> list[_Occurrence]:
    out = []
    for block, sent in evidence:
        for t in sent.terms:
            if same_term(term, t):
                out.append(_Occurrence(block, sent, t.start, t.end))
        if term.kind != "number" and not out:
            # A phrase may sit inside a longer phrase of the evidence (小笠原諸島 in 小笠原諸島沖).
            for t in sent.terms:
                if t.kind != "number" and term.text.lower() in t.text.lower() and len(term.text) >= 2:
                    out.append(_Occurrence(block, sent, t.start, t.end))
    return out


def _score(ctx: set[str], occ: _Occurrence) -> float:
    if not ctx:
        return 1.0
    return len(ctx & occ.sentence.context(occ.start, occ.end, EVIDENCE_WINDOW)) / len(ctx)


def _parts_missing(term: Term, claim: Analysis, evidence: list[tuple[int, Analysis]]) -> bool:
    """A common noun phrase not in the evidence is unsupported unless each of its words is there."""
    have: set[str] = set()
    for _, sent in evidence:
        have |= sent.words
    forms = {f for i in range(term.start, term.end) for f in claim.tokens[i].forms[:1]}
    return any(f not in have for f in forms)


def _restated(claim: Analysis, evidence: list[tuple[int, Analysis]]) -> tuple[int, Analysis] | None:
    """The evidence sentence that ``claim`` restates, if one holds nearly all its words."""
    words = claim.words
    if not words or not evidence:
        return None
    block, best = max(evidence, key=lambda e: len(words & e[1].words))
    return (block, best) if len(words & best.words) / len(words) >= RESTATED else None


def _extent(claim: Analysis, head: Term, sentence: Analysis, start: int, end: int) -> tuple[int, int]:
    """The whole answer around its head term in the evidence: 2018年12月6日, not 2018."""
    last = len(claim.tokens)
    while last > 0 and claim.tokens[last - 1].pos[0] in ("補助記号", "助動詞"):
        last -= 1
    k = head.start - 1
    while k >= 0 and start > 0 and sentence.tokens[start - 1].surface == claim.tokens[k].surface:
        k, start = k - 1, start - 1
    k = head.end
    while k < last and end < len(sentence.tokens) and sentence.tokens[end].surface == claim.tokens[k].surface:
        k, end = k + 1, end + 1
    return start, end


def _echoes(claim: Analysis, question: Analysis) -> bool:
    """Does the answer only repeat words of the question (one of its phrases, nothing new)?"""

    def repeated(t: Term) -> bool:
        return any(same_term(t, q) and counter(claim, t.end) == counter(question, q.end) for q in question.terms)

    if not claim.terms or not all(repeated(t) for t in claim.terms):
        return False
    inside = {i for t in claim.terms for i in range(t.start, t.end)}
    return all(
        not t.forms or not question.words.isdisjoint(t.forms) for i, t in enumerate(claim.tokens) if i not in inside
    )


def _slot_check(
    claim: Analysis, question: Analysis, evidence: list[tuple[int, Analysis]]
) -> tuple[Finding | None, SlotPlaces | None]:
    """Does a bare answer fill the slot the question asks about?

    Every place in the evidence that a phrase of the answer's kind fills is scored by the signs
    in SLOT_WEIGHTS: how much of the question its sentence and its clause hold, how closely the
    question's words surround it, whether the words and the particle next to the wh-word recur
    next to it, whether it is the kind of thing asked for. The evidence must address the
    question, and the answer's best place must score at least about as well as the best place
    of every other phrase of its kind, in its own sentence or elsewhere. An answer that only
    repeats the question fills no slot. The places weighed come back with the finding.
    """
    head = max(claim.terms, key=lambda t: (t.kind != "term", len(t.text)))
    if _echoes(claim, question) and asks_for_slot(question):
        return Finding(1, head.text, head.kind, reason="only repeats the question"), None
    # A question word inside the answer (武力 of 加撃的武力 for "無撃的武力となに") still
    # places it; but an answer the question already spells out gets no credit for it.
    repeats = head.text in question.text
    slot = question_slot(question, claim.words if repeats else None, evidence)
    if slot is None:
        return None, None
    unit = counter(claim, head.end)
    kind = phrase_type(claim, head)
    index = {id(s): n for n, (_, s) in enumerate(evidence)}
    answers: list[tuple[dict[str, float], _Occurrence, tuple[int, int]]] = []
    for o in _occurrences(head, evidence):
        start, end = _extent(claim, head, o.sentence, o.start, o.end)
        answers.append((place_signs(evidence, index[id(o.sentence)], start, end, slot), o, (start, end)))
    if not answers:
        return None, None
    rivals: list[dict[str, float]] = []
    for n, (_, sentence) in enumerate(evidence):
        mine = [span for _, o, extent in answers if o.sentence is sentence for span in (extent, (o.start, o.end))]
        for t in sentence.terms:
            if (
                phrase_type(sentence, t) != kind
                or same_term(head, t)
                or t.text in head.text  # a part of the answer (リラ of リラ冷え); a longer phrase stays a rival
                or t.text in question.text
                or any(same_term(t, own) for own in claim.terms)
                or (unit and counter(sentence, t.end) != unit)
                or any(t.start < e and s < t.end or is_alias(sentence, (s, e), (t.start, t.end)) for s, e in mine)
            ):
                continue
            rivals.append(place_signs(evidence, n, t.start, t.end, slot))
    places = SlotPlaces(tuple(s for s, _, _ in answers), tuple(rivals), slot.top_held >= EVIDENCE_HELD)
    if places.fills(SLOT_MARGIN if is_japanese(question.text) else SLOT_MARGIN_EN):
        return None, places
    scores, rival_scores = places.scores()
    occ = answers[scores.index(max(scores))][1]
    margin = SLOT_MARGIN if is_japanese(question.text) else SLOT_MARGIN_EN
    trail = max(rival_scores, default=0.0) - max(scores) - margin  # > 0: by how much it misses
    # Evidence that does not use the question's words cannot place a bare answer: the lexical check
    # cannot tell a right one from a wrong one there, so its finding is a doubt (the cascade asks).
    strength = PARAPHRASE_DOUBT if not places.addressed else min(1.0, trail / SLOT_SURE)
    return Finding(1, head.text, head.kind, occ.sentence.text, occ.block, strength=strength), places


def leans_on_question(claim: Analysis) -> bool:
    """A bare answer ("小笠原諸島です", "東アジアの広範囲", "1991年"): a noun phrase and a copula.

    No verb, adjective or particle other than の links it to anything, so what it says
    depends on the question.
    """
    content = [t for t in claim.tokens if t.forms or t.number]
    if len(content) > SHORT_CLAIM:
        return False
    for t in claim.tokens:
        if t.pos[0] in ("動詞", "形容詞") and t.forms:
            return False
        if t.pos[0] == "助詞" and t.surface != "の":
            return False
        if t.pos == ("stop",) and t.surface.lower() not in ("the", "a", "an", "of", "is", "it", "it's"):
            return False
    return True


def align_with_places(
    claim: str, evidence: list[tuple[int, str]], question: str | None = None
) -> tuple[list[Finding], SlotPlaces | None]:
    """``align``'s findings, and the places it weighed a bare answer at (None when it weighed none)."""
    return _align(claim, evidence, question)


def slot_places(claim: str, evidence: list[tuple[int, str]], question: str) -> SlotPlaces | None:
    """The places ``align`` weighs a bare answer at, when it gets as far as weighing them.

    None when the verdict on ``claim`` does not turn on where it stands: it is not a bare
    answer, a term of it is not in ``evidence``, it only repeats the question, or the question
    has no words to place it by. Same arguments as ``align``, whose code path this is, so
    SLOT_WEIGHTS and SLOT_MARGIN can be fitted on exactly what the verdict weighs
    (bench/verifier_fit.py).

    Example::

        >>> ev = [(1, "梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨入りは沖縄で5月10日ごろである。")]
        >>> places = slot_places("小笠原諸島です。", ev, "日本で梅雨がないのは北海道とどこか。")
        >>> places.answer[0]["anchor_before"], places.rivals[0]["anchor_before"]  # 北海道と｜どこ
        (1.0, 0.0)
    """
    return _align(claim, evidence, question)[1]


def align(claim: str, evidence: list[tuple[int, str]], question: str | None = None) -> list[Finding]:
    """Findings for each key term of ``claim`` against the cited ``evidence`` (block number, text).

    Example::

        >>> ev = [(1, "梅雨は北海道と小笠原諸島を除く日本でみられる。雨季の一種である。")]
        >>> align("梅雨は北海道と小笠原諸島を除く日本でみられる。", ev)
        []
        >>> [f.cls for f in align("梅雨は雨季と小笠原諸島を除く日本でみられる。", ev)]
        [1]
    """
    return _align(claim, evidence, question)[0]


def _align(
    claim: str, evidence: list[tuple[int, str]], question: str | None
) -> tuple[list[Finding], SlotPlaces | None]:
    c = analyse(claim)
    sentences = [(n, s) for n, text in evidence for s in evidence_sentences(text)]
    q = analyse(question) if question and leans_on_question(c) else None
    # A claim that restates one evidence sentence must keep its terms in that sentence.
    restated = _restated(c, sentences) if q is None else None
    findings: list[Finding] = []
    pending: list[tuple[Term, set[str], list[_Occurrence]]] = []
    for term in c.terms:
        found = _look_up(c, term, sentences, restated)
        if isinstance(found, Finding):
            findings.append(found)
        elif found:
            ctx = c.context(term.start, term.end, CLAIM_WINDOW)
            ctx -= {f for i in range(term.start, term.end) for f in c.tokens[i].forms}
            pending.append((term, ctx, found))
    findings += _relation_findings(pending, judge_context=q is None)
    places = None
    if q is not None and not findings and not c.terms:
        # "ものです", "以下です": nothing the evidence could back, where the question asks for something.
        if asks_for_slot(q) and not any(t.forms or t.number for t in c.tokens):
            findings.append(Finding(2, c.text, "term", reason="says nothing the evidence could back"))
    elif q is not None and not findings:
        slot, places = _slot_check(c, q, sentences)
        if slot:
            findings.append(slot)
    return [replace(f, claim=claim) for f in findings], places


def _look_up(
    c: Analysis, term: Term, sentences: list[tuple[int, Analysis]], restated: tuple[int, Analysis] | None
) -> Finding | list[_Occurrence]:
    """The occurrences of ``term`` that may back it, or the finding when none can."""
    everywhere = _occurrences(term, sentences)
    if term.kind == "number" and counter(c, term.end):
        # 3億人 is not 3億円: a number counts only with the same counter, when both have one.
        same = [o for o in everywhere if counter(o.sentence, o.end) in ("", counter(c, term.end))]
        if everywhere and not same:
            o = everywhere[0]
            return Finding(1, term.text, term.kind, o.sentence.text, o.block)
        everywhere = same
    occs = [o for o in everywhere if o.sentence is restated[1]] if restated else everywhere
    if everywhere and not occs:
        o = everywhere[0]
        return Finding(1, term.text, term.kind, o.sentence.text, o.block)
    if occs:
        return occs
    if term.kind == "number":
        return Finding(2, term.text, term.kind)
    if term.proper:
        return Finding(3, term.text, term.kind)
    # A common noun the evidence lacks may be a paraphrase (開始 for 始める): a finding, not a sure one.
    if restated and _parts_missing(term, c, [restated]):
        cls = 2 if _parts_missing(term, c, sentences) else 1
        return Finding(cls, term.text, term.kind, restated[1].text, restated[0], strength=PARAPHRASE_DOUBT)
    if _parts_missing(term, c, sentences):
        return Finding(2, term.text, term.kind, strength=PARAPHRASE_DOUBT)
    return []


def _relation_findings(
    pending: list[tuple[Term, set[str], list[_Occurrence]]], *, judge_context: bool
) -> list[Finding]:
    """Let the best (term, occurrence) pairs claim their occurrences first; a term left with none, or
    (``judge_context``) whose neighbours do not surround its occurrence, is in another relation."""
    scored = sorted(
        ((_score(ctx, o), k, o) for k, (term, ctx, occs) in enumerate(pending) for o in occs),
        key=lambda x: -x[0],
    )
    best: dict[int, tuple[float, _Occurrence]] = {}
    used: set[tuple[int, int, int]] = set()
    for score, k, occ in scored:
        where = (id(occ.sentence), occ.start, occ.end)
        if k in best or where in used:
            continue
        used.add(where)
        best[k] = (score, occ)
    findings = []
    for k, (term, _ctx, occs) in enumerate(pending):
        if k not in best:
            # Every occurrence went to another mention of the same term.
            findings.append(Finding(1, term.text, term.kind, occs[0].sentence.text, occs[0].block))
            continue
        score, occ = best[k]
        if score < CONTEXT_SUPPORT and judge_context:
            strength = 1.0 - score / CONTEXT_SUPPORT
            findings.append(Finding(1, term.text, term.kind, occ.sentence.text, occ.block, strength=strength))
    return findings
