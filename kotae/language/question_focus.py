"""What a question is about: the terms it asks about, and the kind of answer it asks for.

An answer can be supported by its evidence and still not answer the question (seed 004 keeps
*supported* apart from *relevant*): asked when the new bus line opens, a sentence about the
bus line's route is grounded and says nothing about when. The focus of a question is what an
answer must address:

- the **kind** of answer asked for: when → a date or time, where → a place, who → a person,
  how much → an amount, how many → a count, a yes/no question → a statement about the very
  thing asked. A wh-word (いつ, どこ, いくら, 何人, when, how much …) makes the kind explicit; a
  bare keyword whose last word names a kind (送料, 投票日, 会場) only implies it;
- the **terms** it asks about: its noun phrases (names, compounds, katakana words, common
  nouns), less the words of asking (wh-words, 教えて, formal nouns) and the nouns that only
  name the kind (料金 of "料金はいくら"). Each term keeps its forms, the short units of a
  compound, and its reading, so 補聴器 meets ほちょうき.

Example::

    >>> focus = question_focus("ドクターヘリって1回飛ぶといくらかかるの？")
    >>> focus.kinds, focus.explicit
    (('amount',), True)
    >>> [t.text for t in focus.terms]
    ['ドクターヘリ', '1']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from kotae.language import lexicon
from kotae.language.sentence_analysis import Analysis, Term, analyse, short_units
from kotae.language.text import is_japanese, katakana, normalize, set_aside

#: What each kind of answer is, as a reason says it.
KIND_NAMES = {
    "time": "a date or time",
    "place": "a place",
    "person": "a person",
    "amount": "an amount",
    "count": "a count",
    "quantity": "a number",
}


def _either(name: str) -> str:
    """A regex group that matches any entry of list ``name`` (the longest that fits)."""
    return f"(?:{lexicon.alternation(name)})"


# "when" and "where" ask only where a question or clause starts, or after a verb of asking
# (do you know when …): after a noun they only qualify it (the spell when the weather recovers).
_ASKING_WH = r"(?:^\s*|[.,;:!?]\s*|\b" + _either("focus_wh_leads") + r"\s+)"
# Wh-words and question phrases that make the kind explicit, most specific first.
_ASKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("amount", re.compile(_either("focus_wh_amount"), re.I)),
    ("count", re.compile("(?:何|なん)" + _either("focus_counters") + "|" + _either("focus_wh_count"), re.I)),
    ("time", re.compile(_either("focus_wh_time") + rf"|{_ASKING_WH}when\b", re.I)),
    ("place", re.compile(_either("focus_wh_place") + rf"|{_ASKING_WH}where\b", re.I)),
    ("person", re.compile(_either("focus_wh_person") + r"|\b" + _either("focus_wh_person_en") + r"\b", re.I)),
    ("quantity", re.compile(_either("focus_wh_quantity"), re.I)),
)
# A keyword's last characters that name the kind it is about (送料, 投票日, 会場): implicit kinds.
_KIND_SUFFIX: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("amount", re.compile(_either("focus_suffix_amount") + "$")),
    ("time", re.compile(_either("focus_suffix_time") + "$")),
    ("place", re.compile(_either("focus_suffix_place") + "$")),
    ("count", re.compile(_either("focus_suffix_count") + "$")),
)
# Nouns that only name the kind asked for, or the act of asking: an answer need not repeat them.
_ASKING = lexicon.words("focus_asking_nouns")
_EN_AUX = re.compile("^" + _either("focus_en_auxiliaries") + r"\b", re.I)
_JA_YESNO_END = re.compile("(?:[?？]|" + _either("focus_yes_no_endings") + ")$")


@dataclass(frozen=True)
class FocusTerm:
    """One term a question asks about.

    ``forms``: the normalised forms of its words (a compound also gives its short units);
    ``parts``: its shortest units, in order (the head of a compound last); ``reading``: its
    katakana reading; ``weight``: 1 for a name or a word of two characters or more (it picks out
    one thing), 0.6 for a one-character noun (家, 島, 子), which a paraphrase often changes.
    """

    text: str
    kind: str
    forms: frozenset[str]
    parts: tuple[str, ...]
    reading: str
    weight: float
    kana_runs: tuple[str, ...] = ()  # the long kana spellings it is part of (ほちょうき), as katakana

    @property
    def specific(self) -> bool:
        return self.weight >= 1.0


@dataclass(frozen=True)
class QuestionFocus:
    """The focus of one question: its terms, the kinds of answer it asks for, and whether a
    wh-word asks for them (``explicit``) or a keyword only implies them."""

    text: str
    lang: str
    terms: tuple[FocusTerm, ...]
    kinds: tuple[str, ...]
    explicit: bool
    yes_no: bool

    def describe_kinds(self) -> str:
        return " and ".join(KIND_NAMES[k] for k in self.kinds)


# Question words used as adverbs ask for nothing: いくつか並べた (several), どこまでも (endlessly), いつも (always).
_ADVERBIAL_WH = re.compile(_either("focus_adverbial_wh") + "|(?:いくつ|幾つ)か(?![?？]|$)")


# どちら after the options offered (開始と終了どちらに) picks one of them, not a place.
_CHOICE = re.compile(r"[とか][^、。?？]{0,15}どちら")
# いくら of a count (議席数はいくら) asks how many, not how much money.
_COUNT_PRICED = re.compile(r"数(は|って|が)?\s*(いくら|幾ら)")


def _kinds(text: str, analysis: Analysis) -> tuple[tuple[str, ...], bool]:
    asking = _ADVERBIAL_WH.sub("、", text)
    if _CHOICE.search(asking):
        asking = asking.replace("どちら", "、")
    kinds = tuple(kind for kind, pattern in _ASKS if pattern.search(asking))
    if "amount" in kinds and _COUNT_PRICED.search(asking):
        kinds = tuple(dict.fromkeys("count" if k == "amount" else k for k in kinds))
    if kinds:
        return kinds, True
    if any(t.wh for t in analysis.tokens):
        return (), True  # 何, どんな, what: an open question; the terms carry it
    # A keyword question (送料, 投票日は？): the kind its last noun names.
    nouns = [t for t in analysis.terms if t.kind != "number"]
    last = nouns[-1].text if nouns else ""
    tail = text.rstrip("?？。!！ 　")
    if last and tail.endswith(("は", "って", "とは")) or last and tail.endswith(last):
        return tuple(kind for kind, pattern in _KIND_SUFFIX if pattern.search(last))[:1], False
    return (), False


def _yes_no(text: str, lang: str, explicit: bool) -> bool:
    if explicit:
        return False
    if lang == "en":
        return bool(_EN_AUX.match(text))
    return bool(_JA_YESNO_END.search(text.rstrip("…!！。 　")))


# English nouns that name the kind of answer a "what is the …" question asks for.
_EN_KIND_NOUN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("amount", re.compile(r"\b" + _either("focus_en_kind_amount") + r"s?\b", re.I)),
    ("time", re.compile(r"\b" + _either("focus_en_kind_time") + r"s?\b", re.I)),
    ("place", re.compile(r"\b" + _either("focus_en_kind_place") + r"s?\b", re.I)),
)


def _english_kinds(text: str) -> tuple[str, ...]:
    """The kind a "what is the fare …" question implies (no wh-word of its own names one)."""
    m = re.match(r"(what|what's|whats)\b(\s+is|\s+are)?\s+(the\s+)?(.{0,40})", text, re.I)
    return tuple(kind for kind, pattern in _EN_KIND_NOUN if m and pattern.search(m.group(4)))[:1]


def _runs_over(text: str, term: Term, analysis: Analysis) -> tuple[str, ...]:
    surface = "".join(t.surface for t in analysis.tokens[term.start : term.end])
    return tuple(katakana(run) for run in re.findall(r"[ぁ-ゖァ-ヺー]{4,}", text) if surface and surface in run)


def _english_terms(chunk: str) -> list[FocusTerm]:
    """English: each content word is a term (names and numbers too)."""
    out = []
    for t in analyse(chunk).tokens:
        if not t.forms or t.wh or t.forms[0] in _ASKING:
            continue
        kind = "number" if t.number else "name" if len(t.pos) > 1 and t.pos[1] == "固有名詞" else "term"
        weight = 1.0 if kind != "term" or (len(t.forms[0]) >= 4 and t.forms[0] not in _ACTS) else 0.6
        out.append(FocusTerm(t.surface, kind, frozenset(t.forms), (t.forms[0],), t.reading, weight))
    return out


# Honorifics a viewer puts after a name; the records never do.
_HONORIFIC = re.compile(_either("focus_honorifics") + "$")


def _without_honorifics(term: Term, analysis: Analysis) -> list[Term]:
    """The term without the honorifics a viewer puts after a name (みらいさん → みらい), split where
    one stands inside it (海野さん本人 → 海野, 本人): documents name the person without them."""
    tokens = analysis.tokens[term.start : term.end]
    cuts = [i for i, t in enumerate(tokens) if 0 < i and _HONORIFIC.fullmatch(t.surface)]
    if not cuts:
        return [term]
    pieces, begin = [], 0
    for cut in [*cuts, len(tokens)]:
        if cut > begin:
            text = "".join(t.surface for t in tokens[begin:cut])
            pieces.append(replace(term, text=text, start=term.start + begin, end=term.start + cut))
        begin = cut + 1
    return pieces


def _focus_terms(chunk: str) -> list[FocusTerm]:
    if not is_japanese(chunk):
        return _english_terms(chunk)
    analysis = analyse(chunk)
    terms: list[FocusTerm] = []
    for term in (piece for whole in analysis.terms for piece in _without_honorifics(whole, analysis)):
        before = analysis.tokens[term.start - 1] if term.start > 0 else None
        if before is not None and before.wh and before.pos[0] == "連体詞":
            continue  # どんな言語, どの国: the sort of thing the answer is (英語, オランダ), not what it is about
        if term.text.endswith("以外") or set_aside([t.surface for t in analysis.tokens[term.end : term.end + 2]]):
            continue  # 市役所のほかにどこ: the answer is about anything but it
        tokens = analysis.tokens[term.start : term.end]
        forms = frozenset(f for t in tokens for f in t.forms)
        if not forms or term.text in _ASKING or forms <= _ASKING:
            continue
        parts = tuple(p for p in short_units(term.text) if p not in _ASKING) or (term.text,)
        # The act a where/how question asks about (どこで確認できる, どこに相談すれば) is how it asks,
        # not what: answers name the place or the channel, rarely the act.
        specific = (term.kind != "term" or len(term.text) >= 2) and term.text not in _ACTS
        reading = "".join(t.reading for t in tokens)
        runs = _runs_over(chunk, term, analysis)
        terms.append(FocusTerm(term.text, term.kind, forms, parts, reading, 1.0 if specific else 0.6, runs))
    return terms


# Verbal nouns of reaching someone or doing a procedure (see _focus_terms).
_ACTS = lexicon.words("focus_acts")


# Verbs and adjectives of asking, wishing and chatting, not of what is asked about.
_LIGHT_PREDICATES = lexicon.words("focus_light_predicates")


def _predicates(analysis: Analysis, taken: set[str]) -> list[FocusTerm]:
    out = []
    for t in analysis.tokens:
        if t.pos[0] in ("動詞", "形容詞") and t.forms and t.forms[0] not in taken | _LIGHT_PREDICATES:
            form = t.forms[0]
            out.append(FocusTerm(t.surface, "predicate", frozenset(t.forms), (form,), t.reading, 0.6))
            taken.add(form)
    return out


@lru_cache(maxsize=4096)
def question_focus(question: str) -> QuestionFocus:
    """The terms ``question`` asks about and the kinds of answer it asks for."""
    text = normalize(question)
    analysis = analyse(text)
    lang = "ja" if is_japanese(text) else "en"
    kinds, explicit = _kinds(text, analysis)
    if lang == "en" and not kinds:
        kinds = _english_kinds(text)
    # Keywords typed apart (グミ ゼラチン) are separate terms; English is read whole.
    chunks = text.split(" ") if lang == "ja" else [text]
    terms = [t for chunk in chunks if chunk for t in _focus_terms(chunk)]
    yes_no = _yes_no(text, lang, explicit)
    if yes_no:
        # A yes/no question is answered by a statement about its predicate (辞めた, 入れる) too.
        terms += _predicates(analysis, {f for t in terms for f in t.forms})
    return QuestionFocus(
        text=text,
        lang=lang,
        terms=tuple(terms),
        kinds=kinds,
        explicit=explicit,
        yes_no=yes_no,
    )


# --- what a sentence holds -----------------------------------------------------------------

# Kanji numerals: before a counter (三人, 二割) they give a count in words.
_KANJI_NUMERAL = "[一二三四五六七八九十百千万]+"


def _any_of(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(alternatives), re.I)


# What a sentence must hold to fill each kind of answer asked for (the place and the person are
# read from its terms, in holds_kind).
_FILLS: dict[str, re.Pattern[str]] = {
    "time": _any_of(
        r"\d+\s*" + _either("focus_fills_time_units"),
        r"\d{1,2}:\d{2}",
        r"[(（][月火水木金土日][)）]",  # a weekday in brackets after a date: 3日(月)
        _either("focus_fills_time_words"),
        r"\b" + _either("focus_fills_time_words_en") + r"\b",
        r"\b\d+\s*" + _either("focus_fills_time_units_en") + r"\b",
    ),
    "amount": _any_of(
        r"\d[\d,.]*\s*[万億千]?\s*" + _either("focus_fills_currencies"),
        r"[¥$€]\s*\d",
        r"\d\s*" + _either("focus_fills_currencies_en") + r"\b",
        _either("focus_fills_amount_words"),
        r"\d+\s*" + _either("focus_fills_rates"),
        r"\d+分の\d+",  # a fraction: 3分の1
        r"\b" + _either("focus_fills_amount_words_en") + r"\b",
    ),
    "count": _any_of(
        r"\d",
        _KANJI_NUMERAL + "(?:" + _either("focus_fills_counters") + "|" + _either("focus_fills_count_counters") + ")",
        r"\b" + _either("focus_fills_numbers_en") + r"\b",
    ),
    "quantity": _any_of(
        r"\d",
        _KANJI_NUMERAL + "(?:" + _either("focus_fills_counters") + "|" + _either("focus_fills_quantity_counters") + ")",
        _either("focus_fills_quantity_words"),
        r"\b" + _either("focus_fills_quantity_words_en") + r"\b",
    ),
}
# 部 ends a place (広報部) but not 一部, 全部, 細部, 外部, 内部 or 大部, hence the check before it.
_PLACE_SUFFIX = re.compile("(?:" + lexicon.alternation("focus_holds_place_suffix") + "|(?<![一全細外内大])部)$")
_PERSON_SUFFIX = re.compile(_either("focus_holds_person_suffix") + "$")
# English: a place named after a preposition (at the Civic Hall), or a noun of where to go or ask.
_EN_PLACE = re.compile(r"\b" + _either("focus_holds_place_prepositions_en") + r"\s+(the\s+)?[A-Z]")
_EN_PLACE_NOUN = re.compile(r"\b" + _either("focus_holds_place_nouns_en") + r"s?\b", re.I)


_KANJI_NOUN = re.compile(r"[\u4e00-\u9fff々]{2,}")


def names_only_the_kind(noun: str) -> bool:
    """Does ``noun`` only name the kind of answer asked for, or the asking (料金, 出身地, 呼び方)?

    No record need say it: asked 出身地はどこ, a profile answers 磯辺町生まれ.
    """
    return noun in _ASKING


def holds_kind(kind: str, text: str, *, besides: frozenset[str] = frozenset()) -> bool:
    """Does ``text`` hold a phrase of the kind of answer ``kind`` (a date, an amount, a place …)?

    A person or a place must be a phrase other than ``besides`` (the question's own terms) and
    their parts: asked who the governor is, 知事 names nobody; 国連事務総長 names one though the
    question said 国連.

    Example::

        >>> holds_kind("time", "2027年10月から2年間試行する。"), holds_kind("amount", "路線バスを増やす。")
        (True, False)
    """
    if kind in _FILLS:
        return bool(_FILLS[kind].search(normalize(text)))
    analysis = analyse(text)
    terms = [t for t in analysis.terms if not any(t.text in b for b in besides)]
    if kind == "place":
        for t in terms:
            tokens = analysis.tokens[t.start : t.end]
            if t.kind == "org" or any(len(k.pos) > 2 and k.pos[2] == "地名" for k in tokens):
                return True
            if t.kind != "number" and _PLACE_SUFFIX.search(t.text):
                return True
        return bool(_EN_PLACE.search(text) or _EN_PLACE_NOUN.search(text))
    if kind == "person":
        for t in terms:
            head = analysis.tokens[t.end - 1]
            if t.kind == "org" or (t.kind != "number" and _PERSON_SUFFIX.search(t.text)):
                return True
            # A name makes a person's phrase (青葉みらい) unless a kanji noun heads it: in
            # しおかぜ県知事選挙 the name only qualifies an event.
            proper = len(head.pos) > 1 and head.pos[1] == "固有名詞"
            if t.kind in ("person", "name") and (proper or not _KANJI_NOUN.fullmatch(head.surface)):
                return True
            # A foreign name in katakana that the dictionary does not know (シーパンドン); a loanword it
            # knows (コーナー, バッテリー) names no one.
            if re.fullmatch(r"[ァ-ヺー・]{2,}", t.text) and any(k.unknown for k in analysis.tokens[t.start : t.end]):
                return True
        return bool(re.search(r"\b[A-Z][a-z]+\s+[A-Z][a-z]+\b", text))
    return True
