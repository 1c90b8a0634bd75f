"""Key terms: what a comment names, and whether a knowledge base has it under any spelling.

A comment's key terms are its nouns as Sudachi reads them in its longest units
(mode C: 消費税, 期日前投票, 外国人労働者), leaving out question words (何党 is a
question about 党), pronouns, numbers and counters, adverbial nouns (今日, 最近) and
formal nouns (こと, ため). Latin-script words of an English comment are terms too.
A term is *specific* when it names one thing: a proper noun (海野, ラオス) or a
compound of several words (消費税 = 消費 + 税, 初乗り運賃); an everyday word (母,
近所, 畑) or a loanword (セット, コーチ) is not, and neither is a word written in
hiragana, which Sudachi often cannot place.

A knowledge base's :class:`Vocabulary` holds what its records say: the words
(normalised forms and surfaces, compounds and their parts; a term inside a longer
word, 宿泊 in 宿泊税, is there too), the katakana readings of its nouns (so ほちょうき
meets 補聴器, and 臨界鉄道 — a homophone typo — meets 臨海鉄道), and their Sudachi
synonym groups (給料 meets 給与). :meth:`Vocabulary.find` says how a term is present,
or None: the term then appears in no record of the knowledge base.

Example::

    vocab = Vocabulary.of(["宿泊税は1泊200円です。", "補聴器の購入を助成します。"])
    [t.surface for t in key_terms("消費税は下げてくれるの？")]   # ['消費税']
    vocab.find(key_terms("消費税は下げてくれるの？")[0])        # None: no record has it
    vocab.respell("ほちょうき")                                  # ['補聴器']
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kotae.language import lexicon
from kotae.language.morphemes import Morpheme, morphemes
from kotae.language.spelling import nearest
from kotae.language.text import EN_STOPWORDS, is_japanese, katakana, normalize, set_aside, without_clitic

# Nouns that name nothing by themselves (Sudachi's sub-categories).
_SKIP_SUB = {"数詞", "代名詞", "助数詞"}
_SKIP_DETAIL = {"副詞可能", "助数詞可能"}
_LIGHT = lexicon.words("terms_light")
_QUESTION_NOUN = re.compile("^(" + lexicon.alternation("terms_question_noun") + ")")
_KANA = re.compile(r"^[\u3041-\u309f\u30a0-\u30ffー]+$")
_HONORIFIC = lexicon.words("terms_honorific")
_KATAKANA = re.compile(r"^[\u30a0-\u30ffー]+$")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'\-]*")
#: Distinct Latin words of three letters or more that make records count as written in English.
WRITES_FROM = 20
# Tokens that are not words of a record.
_NOT_WORDS = {"補助記号", "空白", "助詞", "助動詞"}
# Parts of speech whose readings a comment may spell out in kana (新規 is a 形状詞).
_READ_POS = {"名詞", "形状詞", "接頭辞", "接尾辞"}
# A word typed in kana alone: a run of hiragana, or of katakana, of three or more, with no
# kanji or kana of the other script against it (kana against a kanji is its inflection or
# particle: 突入しない, 強くない).
_KANA_RUN = re.compile(
    r"(?<![\u3041-\u3096\u30a1-\u30faー\u4e00-\u9fff])"
    r"([\u3041-\u3096ー]{3,}|[\u30a1-\u30faー]{3,})"
    r"(?![\u3041-\u3096\u30a1-\u30faー\u4e00-\u9fff])"
)


def _may_name(run: str) -> bool:
    """Whether a kana run may be a word spelled by sound: Sudachi reads a noun (or nothing it
    knows) in it, not only pronouns, particles and inflections (これら, ですけど)."""
    return any(m.pos[0] == "名詞" or m.oov for m in morphemes(run))


@dataclass(frozen=True)
class KeyTerm:
    """One thing a comment names."""

    surface: str  # as written (NFKC)
    form: str  # Sudachi's normalised form
    reading: str  # katakana
    synonyms: tuple[int, ...] = ()
    specific: bool = False  # a proper noun or a compound
    latin: bool = False
    proper: bool = False  # a name (Sudachi's 固有名詞, or a capitalised English word inside a sentence)
    stems: tuple[str, ...] = ()  # an affixed compound's words without the affix (バス代 → バス)


def _is_key_noun(m: Morpheme) -> bool:
    pos = m.pos
    if pos[0] != "名詞" or pos[1] in _SKIP_SUB or pos[2] in _SKIP_DETAIL:
        return False
    surface = m.surface
    if m.form in _LIGHT or surface in _LIGHT or _QUESTION_NOUN.match(surface):
        return False
    if surface.isascii():
        return False  # Latin runs are read as English words below
    # A single kana is a particle Sudachi could not place; a single kanji still names (島, 県).
    return len(surface) > 1 or not _KANA.match(surface)


def _is_proper(m: Morpheme) -> bool:
    return m.pos[1] == "固有名詞"


def _shape(m: Morpheme) -> tuple[bool, tuple[str, ...]]:
    """Whether a noun is specific, and the stems of an affixed compound (バス代 → バス; 消費税 → none)."""
    if _KANA.match(m.surface) and not _KATAKANA.match(m.surface):
        return False, ()  # hiragana: often a word Sudachi could not place (ほちょうき as ほ + ちょう + き)
    units = list(m.units("A"))
    if len(units) > 1 and units[0].surface in _HONORIFIC:
        units = units[1:]  # お店, ご予約: the honorific names nothing
    stems = tuple(u.form for u in units if u.pos[0] not in ("接頭辞", "接尾辞"))
    affixed = 0 < len(stems) < len(units)
    proper = _is_proper(m)
    # A proper noun is one name: コンゴ and 共和 in the records do not make コンゴ共和国 theirs.
    return proper or len(units) > 1, stems if affixed and not proper else ()


@lru_cache(maxsize=20_000)
def _key_terms_cached(text: str) -> tuple[KeyTerm, ...]:
    out: list[KeyTerm] = []
    seen: set[str] = set()
    words = morphemes(text)
    for i, m in enumerate(words):
        if not _is_key_noun(m) or m.surface in seen:
            continue
        if set_aside([n.surface for n in words[i + 1 : i + 3]]):
            continue  # 市役所のほかに: what the comment sets aside is not what it asks about
        seen.add(m.surface)
        specific, stems = _shape(m)
        out.append(
            KeyTerm(
                surface=m.surface,
                form=m.form,
                reading=m.reading,
                synonyms=m.synonyms,
                specific=specific,
                stems=stems,
                proper=_is_proper(m),
            )
        )
    japanese = is_japanese(text)
    for match in _LATIN_WORD.finditer(text):
        word = without_clitic(match.group(0))
        low = word.lower().strip("'-")
        if len(low) <= 2 or low in seen or low in EN_STOPWORDS:
            continue
        seen.add(low)
        # A capital letter names something (Osaka, Amazon) — but not at the start of an English sentence.
        before = text[: match.start()].rstrip()
        starts = not japanese and (not before or before[-1] in ".!?")
        named = word[0].isupper() and not starts
        out.append(KeyTerm(surface=low, form=low, reading=low, latin=True, specific=named, proper=named))
    return tuple(out)


def key_terms(text: str) -> list[KeyTerm]:
    """The nouns a comment names, in order (see the module docstring)."""
    return list(_key_terms_cached(normalize(text)))


@dataclass
class Vocabulary:
    """What a knowledge base's records say: words, readings, synonym groups (see the module docstring).

    ``by_reading`` maps a katakana reading, and ``by_synonym`` a Sudachi synonym group, to
    the records' words (most frequent first), so a comment spelled by sound or worded with
    a synonym can be searched in the records' own words (:meth:`rewrite`).
    """

    words: set[str] = field(default_factory=set)
    by_reading: dict[str, list[str]] = field(default_factory=dict)
    by_synonym: dict[int, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # One string holding every word: a term inside a longer word (宿泊 in 宿泊税) is a substring.
        self._joined = "\n".join(sorted(self.words)).lower()

    @classmethod
    def of(cls, texts: list[str]) -> Vocabulary:
        words: set[str] = set()
        readings: dict[str, Counter[str]] = {}
        synonyms: dict[int, Counter[str]] = {}
        for raw in texts:
            for m in morphemes(normalize(raw)):
                if m.pos[0] in _NOT_WORDS:
                    continue
                for unit in (m, *m.middle, *m.short):
                    surface = unit.surface
                    # An English word's normalised form is its katakana (bus → バス): keep the
                    # word as written, so English records stay English.
                    words.update((surface.lower(),) if surface.isascii() else (unit.form, surface))
                    for group in unit.synonyms:
                        synonyms.setdefault(group, Counter())[surface] += 1
                    if unit.pos[0] in _READ_POS and len(unit.reading) >= 2:
                        readings.setdefault(unit.reading, Counter())[surface] += 1
        return cls(
            words,
            {r: [w for w, _ in c.most_common()] for r, c in readings.items()},
            {g: [w for w, _ in c.most_common()] for g, c in synonyms.items()},
        )

    def as_dict(self) -> dict[str, Any]:
        """The vocabulary as an index's meta stores it."""
        return {
            "words": sorted(self.words),
            "by_reading": self.by_reading,
            "by_synonym": {str(g): w for g, w in self.by_synonym.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Vocabulary:
        data = data or {}
        return cls(
            set(data.get("words", [])),
            dict(data.get("by_reading", {})),
            {int(g): w for g, w in data.get("by_synonym", {}).items()},
        )

    def __bool__(self) -> bool:
        return bool(self.words)

    def writes(self, term: KeyTerm) -> bool:
        """Whether the records are written in the script of ``term`` at all (Latin for English, or
        Japanese): a term can only be missing from records that could have spelled it."""
        key = "_latin" if term.latin else "_japanese"
        cached = self.__dict__.get(key)
        if cached is None:
            # A few Latin words (IC, LINE, a URL) do not make a record English: it takes some.
            latin = sum(1 for w in self.words if w.isascii() and w.isalpha() and len(w) > 2)
            cached = latin >= WRITES_FROM if term.latin else any(is_japanese(w) for w in self.words)
            self.__dict__[key] = cached
        return cached

    def find(self, term: KeyTerm) -> str | None:
        """How ``term`` is present — ``word``, ``part`` (inside a longer word), ``reading``, ``synonym``
        or ``stem`` (an affixed compound whose words are there) — or None when no record has it."""
        if term.form in self.words or term.surface in self.words:
            return "word"
        if term.surface.lower() in self._joined:
            return "part"
        if not term.latin and self.spelled(term.reading):
            return "reading"
        if not term.specific and any(g in self.by_synonym for g in term.synonyms):
            # Not for a proper noun or a compound: their synonym groups reach wider
            # (コンゴ共和国 would meet any 共和国).
            return "synonym"
        if term.stems and all(stem in self.words or (len(stem) > 1 and stem in self._joined) for stem in term.stems):
            return "stem"  # バス代 where the records say バス (and 運賃): the affix adds no topic
        if not term.latin and self.slipped(term.surface):
            return "slip"  # モッフパッド typed for the records' モップパッド
        return None

    def slipped(self, written: str) -> str | None:
        """The records' kana word that ``written`` is a typing slip of (:mod:`kotae.language.spelling`)."""
        kana = self.__dict__.get("_kana_words")
        if kana is None:
            kana = self.__dict__["_kana_words"] = [w for w in self.words if _KANA.match(w)]
        return nearest(written, kana)

    def slips(self, text: str) -> list[tuple[str, str]]:
        """Each term of ``text`` that is a slip of a word of the records, with that word (for the reason)."""
        return [(t.surface, w) for t in key_terms(text) if not t.latin and (w := self.slipped(t.surface))]

    def spelled(self, reading: str) -> list[str]:
        """The records' words read as ``reading`` (katakana or hiragana, three kana or more)."""
        reading = katakana(unicodedata.normalize("NFKC", reading))
        return self.by_reading.get(reading, []) if len(reading) >= 3 else []

    def respell(self, text: str) -> list[str]:
        """Words of the records that the kana runs of ``text`` sound like (ほちょうき → 補聴器)."""
        return [w for _, words in self._respelled_runs(normalize(text)) for w in words]

    def _respelled_runs(self, text: str) -> list[tuple[str, list[str]]]:
        """Each kana run of three or more that the records' readings spell wholly, with those words.

        A run is read as the records' words, longest reading first, as long as every piece
        of it is one (しんきしゅうのう → 新規 + 就農); a run already
        written as the records write it (テレワーク), or not wholly theirs, is left alone.
        """
        out = []
        for run in dict.fromkeys(_KANA_RUN.findall(text)):
            if run in self.words or not _may_name(run):
                continue
            pieces = self._segment(katakana(run))
            words = [self.by_reading[p][0] for p in pieces or ()]
            # Hiragana in at most three pieces, one of them a word of two characters or more
            # (ぜんぜん is not 全 + 全); katakana as one word only (a loanword the records lack is
            # not a string of their kanji: デオキシリボザイム).
            most = 1 if _KATAKANA.match(run) else 3
            if words and len(words) <= most and max(map(len, words)) >= 2:
                out.append((run, words))
        return out

    def rewrite(self, text: str) -> str:
        """``text`` in the records' own words, where it can be: kana runs respelled, homophones and
        synonyms of words the records lack replaced by the records' word (see the module docstring).

        Example::

            vocab.rewrite("ほちょうきの補助")          # '補聴器の補助'
            vocab.rewrite("臨界鉄道の新しい車両")      # '臨海鉄道の新しい車両' (a homophone typo)
            vocab.rewrite("ヘルパーの給料")            # 'ヘルパーの給与' (a synonym the records use)
            vocab.rewrite("モッフパッドの交換")        # 'モップパッドの交換' (a typing slip)
        """
        original, text = text, normalize(text)
        for run, words in self._respelled_runs(text):
            text = text.replace(run, "".join(words))
        for term in key_terms(text):
            how = None if term.latin else self.find(term)
            if how == "reading":
                word = next((w for w in self.spelled(term.reading) if self._fits(term.surface, w, text)), None)
            elif how == "synonym":
                word = next(self.by_synonym[g][0] for g in term.synonyms if g in self.by_synonym)
            elif how == "slip":
                word = self.slipped(term.surface)
            else:
                continue
            if word:
                text = text.replace(term.surface, word)
        return text if text != normalize(original) else original  # untouched: as the comment came

    def _fits(self, written: str, word: str, text: str) -> bool:
        """Whether the records' ``word`` can stand for the homophone ``written`` in ``text``.

        Kana spell by sound, so any reading fits; for a word in kanji the sound alone is a
        coincidence (市長 and 視聴 are both シチョウ, 有人 and 友人 ユウジン) unless the records have
        a longer word that ``word`` forms in this very text (機嫌 → 期限, in 賞味期限).
        """
        if _KANA.match(written):
            return True
        swapped = text.replace(written, word)
        return any(word in longer and longer != word and longer in swapped for longer in self._longer(word))

    def _longer(self, word: str) -> list[str]:
        return [w for w in self.words if len(w) > len(word) and word in w]

    def _segment(self, kana: str) -> list[str] | None:
        """``kana`` as a sequence of known readings of two kana or more (longest first), or None."""
        pieces: list[str] = []
        i = 0
        while i < len(kana):
            for j in range(len(kana), i + 1, -1):
                if kana[i:j] in self.by_reading:
                    pieces.append(kana[i:j])
                    i = j
                    break
            else:
                return None
        return pieces
