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

import math
import re
import threading
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from sudachipy import Dictionary, SplitMode

from kotae.knowledge.text import is_japanese, normalize, split_sentences

# How many content words either side of a term make its context in a claim, and in the evidence.
CLAIM_WINDOW = 4
EVIDENCE_WINDOW = 6
# Share of a term's claim context that must surround it in the evidence.
CONTEXT_SUPPORT = 0.5
# Share of a claim's words one evidence sentence must hold for the claim to count as restating it.
RESTATED = 0.7
# A bare answer is judged only against evidence that addresses its question: the evidence's
# sentence holding most of the question must hold at least this share of its words (by rarity).
EVIDENCE_HELD = 0.1
# How much each sign that a place in the evidence fills the question's slot counts (see
# _place_signs). Fitted on the development split of bench/verifier.py — a softmax over the
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
SHORT_CLAIM = 6

_CONTENT_POS = {"名詞", "動詞", "形容詞", "形状詞", "代名詞"}
_PHRASE_POS = {"名詞", "接頭辞", "接尾辞"}
_STOP = {
    "為る", "成る", "有る", "居る", "言う", "出来る", "事", "物", "其れ", "此れ", "方", "所", "様", "為",
    "訳", "です", "ます", "の", "ん", "此の", "其の", "等", "的", "他", "又", "中", "以上", "以下",
}
_EN_STOP = set(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my of on or our so than that the their them then there these they this to was we were what when
    where which who whom why will with would you your about also just not no yes""".split()
)
_WH_JA = re.compile(r"^(何|誰|どこ|何処|いつ|何時|どれ|何れ|どの|どちら|どっち|如何|幾つ|幾ら|いくつ|いくら|なぜ|何故|どんな|どう|どういう)")
_WH_EN = {"who", "whom", "whose", "what", "which", "where", "when", "how", "why"}
_ORG_SUFFIX = re.compile(
    r"(財団|研究所|協会|学会|大学|会社|機構|委員会|協議会|研究会|振興会|連盟|組合|法人|銀行|新聞社?|放送|省|庁|党|社|局|団|センター|ラボ|グループ)$"
)
_EN_WORD = re.compile(r"\d[\d,]*(?:\.\d+)?|[A-Za-z][A-Za-z'\-]*")

_local = threading.local()


def _tokenizer():  # Sudachi tokenizers are not thread-safe: one per thread
    tok = getattr(_local, "tokenizer", None)
    if tok is None:
        tok = _local.tokenizer = Dictionary(dict="core").tokenizer(mode=SplitMode.C)
    return tok


@dataclass(frozen=True)
class Token:
    surface: str
    forms: tuple[str, ...]  # normalised content forms (a compound also gives its parts); empty if none
    pos: tuple[str, ...]
    number: str | None = None  # the value of a numeral, as digits
    wh: bool = False


@dataclass(frozen=True)
class Term:
    """A key term of a text: a number, a proper name or a noun phrase, with its token span."""

    text: str
    kind: str  # "number", "person", "org", "name" (other proper noun), "term" (common noun phrase)
    start: int
    end: int

    @property
    def proper(self) -> bool:
        return self.kind in ("person", "org", "name")


@dataclass(frozen=True)
class Analysis:
    text: str
    tokens: tuple[Token, ...]
    terms: tuple[Term, ...]

    def context(self, start: int, end: int, width: int) -> set[str]:
        """Content forms of up to ``width`` content tokens either side of tokens[start:end]."""
        out: set[str] = set()
        for rng in (range(start - 1, -1, -1), range(end, len(self.tokens))):
            seen = 0
            for i in rng:
                forms = self.tokens[i].forms
                if forms:
                    out.update(forms)
                    seen += 1
                    if seen >= width:
                        break
        return out

    @cached_property
    def words(self) -> frozenset[str]:
        """All content forms of the text."""
        return frozenset(f for t in self.tokens for f in t.forms)

    @cached_property
    def positions(self) -> dict[str, tuple[int, ...]]:
        """Token positions of each content form."""
        out: dict[str, list[int]] = {}
        for i, t in enumerate(self.tokens):
            for f in t.forms:
                out.setdefault(f, []).append(i)
        return {f: tuple(p) for f, p in out.items()}

    @cached_property
    def owners(self) -> tuple[int, ...]:
        """For each token, the token a bracket it sits in is attached to (itself when outside):
        蘭学(らんがく) makes らんがく belong to 蘭学."""
        owners, stack, last = [], [], 0
        for i, t in enumerate(self.tokens):
            if t.surface in ("(", "[", "「", "『", "【"):
                stack.append(last if t.surface in ("(", "[") else i)
            elif t.surface in (")", "]", "」", "』", "】") and stack:
                stack.pop()
            owners.append(stack[-1] if stack else i)
            if not stack and t.surface not in (")", "]"):
                last = i
        return tuple(owners)


# --- analysis ----------------------------------------------------------------------------


def _ja_tokens(text: str) -> list[Token]:
    out: list[Token] = []
    for m in _tokenizer().tokenize(text):
        pos = tuple(m.part_of_speech())
        if pos[0] == "空白":
            continue
        form = m.normalized_form()
        number = form if pos[1] == "数詞" and re.fullmatch(r"\d+(?:\.\d+)?", form) else None
        wh = bool(_WH_JA.match(m.surface()) or _WH_JA.match(form)) and pos[0] in ("代名詞", "名詞", "連体詞", "副詞", "形状詞")
        forms: tuple[str, ...] = (number,) if number is not None else ()
        if pos[0] in _CONTENT_POS and form not in _STOP and not wh and number is None:
            if form.isascii():
                forms = tuple(w.lower() for w in _EN_WORD.findall(form))
            else:
                parts = [p.normalized_form() for p in m.split(SplitMode.A)] if len(m.surface()) > 2 else []
                forms = tuple(dict.fromkeys([form] + [p for p in parts if p not in _STOP and len(p) > 1]))
        out.append(Token(m.surface(), forms, pos, number, wh))
    return out


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _en_tokens(text: str) -> list[Token]:
    out: list[Token] = []
    for i, m in enumerate(_EN_WORD.finditer(text)):
        word = m.group(0)
        low = word.lower()
        if word[0].isdigit():
            value = word.replace(",", "")
            out.append(Token(word, (value,), ("名詞", "数詞"), value))
            continue
        sentence_start = i == 0 or text[: m.start()].rstrip().endswith((".", "!", "?", ":"))
        proper = word[0].isupper() and not sentence_start and low not in _EN_STOP
        pos = ("名詞", "固有名詞") if proper else (("stop",) if low in _EN_STOP else ("名詞", "普通名詞"))
        forms = () if low in _EN_STOP or len(low) < 2 else (_stem(low),)
        out.append(Token(word, forms, pos, None, low in _WH_EN))
    return out


def _kind(tokens: list[Token], text: str) -> str:
    pos = [t.pos for t in tokens]
    if any(len(p) > 2 and p[2] == "人名" for p in pos):
        return "person"
    if any(len(p) > 2 and p[2] == "組織名" for p in pos) or _ORG_SUFFIX.search(text):
        return "org" if len(text) > 2 else "term"
    if any(len(p) > 1 and p[1] == "固有名詞" for p in pos):
        return "name"
    return "term"


def _terms(tokens: list[Token]) -> list[Term]:
    """Numbers, and maximal noun phrases (numerals and their counters cut out) as terms."""
    out: list[Term] = []
    run: list[int] = []

    def flush() -> None:
        if not run:
            return
        toks = [tokens[i] for i in run]
        text = "".join(t.surface for t in toks) if not toks[0].surface.isascii() else " ".join(t.surface for t in toks)
        if any(t.forms for t in toks) and not any(t.wh for t in toks):
            out.append(Term(text, _kind(toks, text), run[0], run[-1] + 1))
        run.clear()

    for i, t in enumerate(tokens):
        if t.number is not None:
            flush()
            out.append(Term(t.number, "number", i, i + 1))
            continue
        is_counter = bool(out and out[-1].kind == "number" and out[-1].end == i and len(t.pos) > 2 and "助数詞" in "".join(t.pos))
        if t.pos[0] in _PHRASE_POS and t.pos[1] != "数詞" and not is_counter:
            if t.pos[0] == "名詞" and t.surface.isascii() and t.pos[1] != "固有名詞" and not t.surface[0].isupper():
                flush()  # a lower-case English word is not part of a name
                continue
            run.append(i)
        else:
            flush()
    flush()
    return out


@lru_cache(maxsize=20_000)
def analyse(text: str) -> Analysis:
    """Tokens (with positions, parts of speech, numbers) and key terms of one sentence."""
    text = normalize(text)
    tokens = _ja_tokens(text) if is_japanese(text) else _en_tokens(text)
    return Analysis(text, tuple(tokens), tuple(_terms(tokens)))


@lru_cache(maxsize=5_000)
def evidence_sentences(text: str) -> tuple[Analysis, ...]:
    return tuple(analyse(s) for s in split_sentences(normalize(text)))


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


def _same_term(a: Term, b: Term) -> bool:
    if a.kind == "number" or b.kind == "number":
        return a.kind == b.kind and float(a.text) == float(b.text)
    return a.text.lower() == b.text.lower()  # both come from normalised text


def _occurrences(term: Term, evidence: list[tuple[int, Analysis]]) -> list[_Occurrence]:
    out = []
    for block, sent in evidence:
        for t in sent.terms:
            if _same_term(term, t):
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


def _attached(token: Token) -> bool:
    """A suffix or counter that belongs to the word before it (何*年*, 雨*季*)."""
    return token.pos[0] == "接尾辞" or (len(token.pos) > 2 and token.pos[2].startswith("助数詞"))


def _counter(sentence: Analysis, end: int) -> str:
    """The counter after a number (年, 人, 位); empty for other terms."""
    tokens = sentence.tokens
    return tokens[end].surface if end < len(tokens) and _attached(tokens[end]) else ""


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
    while end < len(tokens) and _attached(tokens[end]):
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


def _alias(sentence: Analysis, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Is one span a parenthesised reading or alias of the other (蘭学(らんがく), 1888年(仏暦2431年))?"""
    owners = sentence.owners
    tokens = sentence.tokens

    def head_end(span: tuple[int, int]) -> int:
        end = span[1]
        while end < len(tokens) and _attached(tokens[end]):
            end += 1
        return end

    return any(a[0] <= owners[i] < head_end(a) for i in range(*b)) or any(b[0] <= owners[i] < head_end(b) for i in range(*a))


_ANAPHORA = re.compile(r"^(これ|それ|あれ|この|その|あの|こう|そう|同|後者|前者|彼|彼女|彼ら|本|当|同様)")


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


# --- bare answers ------------------------------------------------------------------------

# Case particles, with は read as が: 誰が ~ Xは.
_CASE = {"が": "が", "は": "が", "を": "を", "に": "に", "へ": "に", "で": "で", "と": "と", "の": "の", "から": "から", "まで": "まで", "より": "より"}
_NAMING = re.compile(r"(何|なん|なに)(と|て)(いう|言う|いい|言い|呼|称|読|表)|名前は|名称は|呼び名|別名|略称|通称|読み")
# A question that offers its answers (AとBのどちらか, 長い？短い？) may be answered with its own words.
_CHOICE = re.compile(r"どちら|どっち|どれ|いずれ|それとも|のうち|か[、,？?]|[？?].+[？?]|か.+か|\bor\b|\bwhich\b", re.I)
_CLOSING = (")", "]", "」", "』", "】")


@dataclass(frozen=True)
class _Slot:
    """What a question asks for, as far as words can tell."""

    asked: tuple[_Asked, ...]
    anchors: tuple[tuple[str, ...], tuple[str, ...], frozenset[str]]
    particle: str | None  # the case particle after the wh-word
    kind_noun: str  # the noun naming what is asked: 公用語 (ラオスの公用語は何), 気団 (何気団)
    naming: bool  # asks what something is called
    top_held: float  # the most of the question one sentence of the evidence holds


def _particle_after(tokens: tuple[Token, ...], end: int) -> str | None:
    while end < len(tokens) and (_attached(tokens[end]) or tokens[end].surface in _CLOSING):
        end += 1
    if end < len(tokens) and tokens[end].pos[0] == "助詞":
        return _CASE.get(tokens[end].surface)
    return None


def _kind_noun(question: Analysis) -> str:
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
        if wh + 2 < len(tokens) and tokens[wh + 1].surface in ("の", "という", "と言う") and tokens[wh + 2].pos[0] == "名詞":
            return tokens[wh + 2].surface
    i = (len(tokens) if wh is None else wh) - 1
    while i >= 0 and tokens[i].pos[0] in ("補助記号", "助詞", "助動詞"):
        i -= 1
    return tokens[i].surface if i >= 0 and tokens[i].pos[0] in ("名詞", "接尾辞") else ""


def _slot(question: Analysis, own: frozenset[str] | None, evidence: list[tuple[int, Analysis]]) -> _Slot | None:
    asked = _asked(question, own, evidence)
    if not asked:
        return None
    wh = next((i for i, t in enumerate(question.tokens) if t.wh), None)
    japanese = is_japanese(question.text)
    return _Slot(
        asked=tuple(asked),
        anchors=_anchors(question),
        particle=_particle_after(question.tokens, wh + 1) if wh is not None else None,
        kind_noun=_kind_noun(question) if japanese else "",
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


def _place_signs(evidence: list[tuple[int, Analysis]], n: int, start: int, end: int, slot: _Slot) -> dict[str, float]:
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
    while last < len(tokens) and _attached(tokens[last]):
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


def _type(sentence: Analysis, term: Term) -> str:
    """The kind a phrase competes within: a person with people, a place with places, a number
    with numbers, a common noun with common nouns; organisations and other names together
    (気団 and 高気圧 name the same sort of thing)."""
    if term.kind not in ("name", "org"):
        return term.kind
    place = any(len(t.pos) > 2 and t.pos[2] == "地名" for t in sentence.tokens[term.start : term.end])
    return "place" if place else "name"


def _echoes(claim: Analysis, question: Analysis) -> bool:
    """Does the answer only repeat words of the question (one of its phrases, nothing new)?"""

    def repeated(t: Term) -> bool:
        return any(_same_term(t, q) and _counter(claim, t.end) == _counter(question, q.end) for q in question.terms)

    if not claim.terms or not all(repeated(t) for t in claim.terms):
        return False
    inside = {i for t in claim.terms for i in range(t.start, t.end)}
    return all(not t.forms or not question.words.isdisjoint(t.forms) for i, t in enumerate(claim.tokens) if i not in inside)


def _asks_for_slot(question: Analysis) -> bool:
    """Does the question ask for something it does not offer (not yes/no, not a choice)?"""
    if _CHOICE.search(question.text):
        return False
    if any(t.wh for t in question.tokens):
        return True
    tokens = [t for t in question.tokens if t.pos[0] != "補助記号"]
    return bool(tokens) and tokens[-1].surface in ("は", "とは", "って", "が")


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
    if _echoes(claim, question) and _asks_for_slot(question):
        return Finding(1, head.text, head.kind, reason="only repeats the question"), None
    # A question word inside the answer (武力 of 加撃的武力 for "無撃的武力となに") still
    # places it; but an answer the question already spells out gets no credit for it.
    repeats = head.text in question.text
    slot = _slot(question, claim.words if repeats else None, evidence)
    if slot is None:
        return None, None
    counter = _counter(claim, head.end)
    kind = _type(claim, head)
    index = {id(s): n for n, (_, s) in enumerate(evidence)}
    answers: list[tuple[dict[str, float], _Occurrence, tuple[int, int]]] = []
    for o in _occurrences(head, evidence):
        start, end = _extent(claim, head, o.sentence, o.start, o.end)
        answers.append((_place_signs(evidence, index[id(o.sentence)], start, end, slot), o, (start, end)))
    if not answers:
        return None, None
    rivals: list[dict[str, float]] = []
    for n, (_, sentence) in enumerate(evidence):
        mine = [span for _, o, extent in answers if o.sentence is sentence for span in (extent, (o.start, o.end))]
        for t in sentence.terms:
            if (
                _type(sentence, t) != kind
                or _same_term(head, t)
                or t.text in head.text  # a part of the answer (リラ of リラ冷え); a longer phrase stays a rival
                or t.text in question.text
                or any(_same_term(t, own) for own in claim.terms)
                or (counter and _counter(sentence, t.end) != counter)
                or any(t.start < e and s < t.end or _alias(sentence, (s, e), (t.start, t.end)) for s, e in mine)
            ):
                continue
            rivals.append(_place_signs(evidence, n, t.start, t.end, slot))
    places = SlotPlaces(tuple(s for s, _, _ in answers), tuple(rivals), slot.top_held >= EVIDENCE_HELD)
    if places.fills(SLOT_MARGIN if is_japanese(question.text) else SLOT_MARGIN_EN):
        return None, places
    scores, _ = places.scores()
    occ = answers[scores.index(max(scores))][1]
    return Finding(1, head.text, head.kind, occ.sentence.text, occ.block), places


def _leans_on_question(claim: Analysis) -> bool:
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
    q = analyse(question) if question and _leans_on_question(c) else None
    # A claim that restates one evidence sentence must keep its terms in that sentence.
    restated = _restated(c, sentences) if q is None else None
    findings: list[Finding] = []
    places = None
    # Score every (claim term, evidence occurrence) pair, then let the best pairs claim their occurrences first.
    pending: list[tuple[Term, set[str], list[_Occurrence]]] = []
    for term in c.terms:
        ctx = c.context(term.start, term.end, CLAIM_WINDOW)
        own_forms = {f for i in range(term.start, term.end) for f in c.tokens[i].forms}
        ctx -= own_forms
        everywhere = _occurrences(term, sentences)
        if term.kind == "number" and _counter(c, term.end):
            # 3億人 is not 3億円: a number counts only with the same counter, when both have one.
            same = [o for o in everywhere if _counter(o.sentence, o.end) in ("", _counter(c, term.end))]
            if everywhere and not same:
                o = everywhere[0]
                findings.append(Finding(1, term.text, term.kind, o.sentence.text, o.block))
                continue
            everywhere = same
        occs = [o for o in everywhere if o.sentence is restated[1]] if restated else everywhere
        if everywhere and not occs:
            o = everywhere[0]
            findings.append(Finding(1, term.text, term.kind, o.sentence.text, o.block))
            continue
        if not occs:
            if term.kind == "number":
                findings.append(Finding(2, term.text, term.kind))
            elif term.proper:
                findings.append(Finding(3, term.text, term.kind))
            elif restated and _parts_missing(term, c, [restated]):
                cls = 2 if _parts_missing(term, c, sentences) else 1
                findings.append(Finding(cls, term.text, term.kind, restated[1].text, restated[0]))
            elif _parts_missing(term, c, sentences):
                findings.append(Finding(2, term.text, term.kind))
            continue
        pending.append((term, ctx, occs))
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
    for k, (term, ctx, occs) in enumerate(pending):
        if k not in best:
            # Every occurrence went to another mention of the same term.
            findings.append(Finding(1, term.text, term.kind, occs[0].sentence.text, occs[0].block))
            continue
        score, occ = best[k]
        if score < CONTEXT_SUPPORT and q is None:
            findings.append(Finding(1, term.text, term.kind, occ.sentence.text, occ.block))
    if q is not None and not findings and not c.terms:
        # "ものです", "以下です": nothing the evidence could back, where the question asks for something.
        if _asks_for_slot(q) and not any(t.forms or t.number for t in c.tokens):
            findings.append(Finding(2, c.text, "term", reason="says nothing the evidence could back"))
    elif q is not None and not findings:
        slot, places = _slot_check(c, q, sentences)
        if slot:
            findings.append(slot)
    return [replace(f, claim=claim) for f in findings], places
