"""Key terms of a sentence: Sudachi's analysis into tokens, with their content forms, readings,
numbers and wh-words, and the sentence's numbers, proper names and noun phrases.

Shared by the checks that read answers against evidence: the verifier's aligned support,
the answer slot of a question (:mod:`kotae.language.answer_slot`), the relevance check and the
extractive generator. Japanese goes through Sudachi (split mode C, with the short units of a
compound as extra forms); English is split into words reduced to their lemmas. A term's
kind is read from the parts of speech: a person, an organisation, another proper name, a
number, or a common noun phrase.

Example::

    >>> a = analyse("保育料は月額1万5千円を上限にします。")
    >>> [(t.text, t.kind) for t in a.terms]
    [('保育料', 'term'), ('月額', 'term'), ('15000', 'number'), ('上限', 'term')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from kotae.language import lexicon
from kotae.language.morphemes import morphemes, units
from kotae.language.text import is_japanese, katakana, normalize, split_sentences, stem, without_clitic

_CONTENT_POS = {"名詞", "動詞", "形容詞", "形状詞", "代名詞"}
_PHRASE_POS = {"名詞", "接頭辞", "接尾辞"}
#: Nouns that round off a time or an amount (上旬ごろ, 3日ほど): they end a phrase, so that
#: 上旬ごろ東日本 is two things, not one.
_ROUNDING = lexicon.words("analysis_rounding")
_STOP = lexicon.words("analysis_stop_ja")
_EN_STOP = lexicon.words("analysis_stop_en")
_WH_JA = re.compile("^(" + lexicon.alternation("analysis_wh_ja") + ")")
_WH_EN = lexicon.words("analysis_wh_en")
_ORG_SUFFIX = re.compile("(" + lexicon.alternation("analysis_org_suffix") + ")$")
_EN_WORD = re.compile(r"\d[\d,]*(?:\.\d+)?|[A-Za-z][A-Za-z'\-]*")


@dataclass(frozen=True)
class Token:
    surface: str
    forms: tuple[str, ...]  # normalised content forms (a compound also gives its parts); empty if none
    pos: tuple[str, ...]
    number: str | None = None  # the value of a numeral, as digits
    wh: bool = False
    reading: str = ""  # katakana reading (Japanese), lower-case word (English): meets a word spelt in kana
    unknown: bool = False  # not in Sudachi's dictionary (a name it has never seen, シーパンドン)


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
    def reading(self) -> str:
        """The katakana reading of the whole text (Japanese), its lower-case words (English)."""
        return "".join(t.reading for t in self.tokens)

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
    for m in morphemes(text):
        pos = m.pos
        if pos[0] == "空白":
            continue
        form = m.form
        number = form if pos[1] == "数詞" and re.fullmatch(r"\d+(?:\.\d+)?", form) else None
        wh = bool(_WH_JA.match(m.surface) or _WH_JA.match(form)) and pos[0] in (
            "代名詞",
            "名詞",
            "連体詞",
            "副詞",
            "形状詞",
        )
        forms: tuple[str, ...] = (number,) if number is not None else ()
        if pos[0] in _CONTENT_POS and form not in _STOP and not wh and number is None:
            if form.isascii():
                forms = tuple(w.lower() for w in _EN_WORD.findall(form))
            else:
                parts = [p.form for p in m.short] if len(m.surface) > 2 else []
                forms = tuple(dict.fromkeys([form] + [p for p in parts if p not in _STOP and len(p) > 1]))
        out.append(Token(m.surface, forms, pos, number, wh, katakana(m.reading), m.oov))
    return out


@lru_cache(maxsize=20_000)
def short_units(text: str) -> tuple[str, ...]:
    """Normalised forms of the content words of ``text`` in Sudachi's shortest units, in order:
    消費税 → (消費, 税), 初乗り運賃 → (初乗り, 運賃); the last is the head of a compound."""
    if not is_japanese(text):
        return tuple(t.forms[0] for t in _en_tokens(text) if t.forms)
    return tuple(m.form for m in units(normalize(text), "A") if m.pos[0] in _CONTENT_POS or m.pos[0] == "接尾辞")


def _en_tokens(text: str) -> list[Token]:
    out: list[Token] = []
    for i, m in enumerate(_EN_WORD.finditer(text)):
        word = m.group(0) if m.group(0)[0].isdigit() else without_clitic(m.group(0))
        low = word.lower()
        if word[0].isdigit():
            value = word.replace(",", "")
            out.append(Token(word, (value,), ("名詞", "数詞"), value, reading=value))
            continue
        sentence_start = i == 0 or text[: m.start()].rstrip().endswith((".", "!", "?", ":"))
        proper = word[0].isupper() and not sentence_start and low not in _EN_STOP
        pos = ("名詞", "固有名詞") if proper else (("stop",) if low in _EN_STOP else ("名詞", "普通名詞"))
        forms = () if low in _EN_STOP or len(low) < 2 else (stem(low),)
        out.append(Token(word, forms, pos, None, low in _WH_EN, low))
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
        is_counter = bool(
            out and out[-1].kind == "number" and out[-1].end == i and len(t.pos) > 2 and "助数詞" in "".join(t.pos)
        )
        if t.surface in _ROUNDING:
            flush()
            continue
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


_NEGATORS_JA = lexicon.words("analysis_negators_ja")
_NEGATORS_EN = lexicon.words("analysis_negators_en")


def negations(sentence: Analysis) -> int:
    """How many negators the sentence holds (〜ない, 〜ず, 〜ません, not, never): its polarity is the parity."""
    n = 0
    for t in sentence.tokens:
        if t.pos[0] in ("助動詞", "形容詞") and t.surface in _NEGATORS_JA:
            n += 1
        elif t.surface.lower() in _NEGATORS_EN or t.surface.lower().endswith("n't"):
            n += 1
    return n


def attached(token: Token) -> bool:
    """A suffix or counter that belongs to the word before it (何*年*, 雨*季*)."""
    return token.pos[0] == "接尾辞" or (len(token.pos) > 2 and token.pos[2].startswith("助数詞"))


def counter(sentence: Analysis, end: int) -> str:
    """The counter after a number (年, 人, 位); empty for other terms."""
    tokens = sentence.tokens
    return tokens[end].surface if end < len(tokens) and attached(tokens[end]) else ""


def same_term(a: Term, b: Term) -> bool:
    """The same number (by value), or the same phrase (case aside)."""
    if a.kind == "number" or b.kind == "number":
        return a.kind == b.kind and float(a.text) == float(b.text)
    return a.text.lower() == b.text.lower()  # both come from normalised text


def phrase_type(sentence: Analysis, term: Term) -> str:
    """The kind a phrase competes within: a person with people, a place with places, a number
    with numbers, a common noun with common nouns; organisations and other names together
    (気団 and 高気圧 name the same sort of thing)."""
    if term.kind not in ("name", "org"):
        return term.kind
    place = any(len(t.pos) > 2 and t.pos[2] == "地名" for t in sentence.tokens[term.start : term.end])
    return "place" if place else "name"
