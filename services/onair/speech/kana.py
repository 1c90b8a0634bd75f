"""Hepburn romaji ⇄ katakana, for names that cross languages.

A Japanese answer may spell a Japanese name in Latin letters (``Minato``,
``Shiomi-cho``), which Open JTalk would read letter by letter; an English answer
may keep a name in Japanese script (``汐見線``), which an English voice cannot
read at all. This module turns one into the other.
"""

from __future__ import annotations

# romaji → katakana; digraphs before the single syllables they start with.
_SYLLABLES = {
    "kya": "キャ", "kyu": "キュ", "kyo": "キョ", "sha": "シャ", "shu": "シュ", "sho": "ショ", "she": "シェ",
    "cha": "チャ", "chu": "チュ", "cho": "チョ", "che": "チェ", "nya": "ニャ", "nyu": "ニュ", "nyo": "ニョ",
    "hya": "ヒャ", "hyu": "ヒュ", "hyo": "ヒョ", "mya": "ミャ", "myu": "ミュ", "myo": "ミョ", "rya": "リャ",
    "ryu": "リュ", "ryo": "リョ", "gya": "ギャ", "gyu": "ギュ", "gyo": "ギョ", "ja": "ジャ", "ju": "ジュ",
    "jo": "ジョ", "je": "ジェ", "bya": "ビャ", "byu": "ビュ", "byo": "ビョ", "pya": "ピャ", "pyu": "ピュ",
    "pyo": "ピョ", "shi": "シ", "chi": "チ", "tsu": "ツ", "fu": "フ", "ji": "ジ",
    "ka": "カ", "ki": "キ", "ku": "ク", "ke": "ケ", "ko": "コ", "sa": "サ", "su": "ス", "se": "セ", "so": "ソ",
    "ta": "タ", "te": "テ", "to": "ト", "na": "ナ", "ni": "ニ", "nu": "ヌ", "ne": "ネ", "no": "ノ",
    "ha": "ハ", "hi": "ヒ", "he": "ヘ", "ho": "ホ", "ma": "マ", "mi": "ミ", "mu": "ム", "me": "メ", "mo": "モ",
    "ya": "ヤ", "yu": "ユ", "yo": "ヨ", "ra": "ラ", "ri": "リ", "ru": "ル", "re": "レ", "ro": "ロ",
    "wa": "ワ", "wo": "ヲ", "ga": "ガ", "gi": "ギ", "gu": "グ", "ge": "ゲ", "go": "ゴ", "za": "ザ", "zu": "ズ",
    "ze": "ゼ", "zo": "ゾ", "da": "ダ", "de": "デ", "do": "ド", "ba": "バ", "bi": "ビ", "bu": "ブ", "be": "ベ",
    "bo": "ボ", "pa": "パ", "pi": "ピ", "pu": "プ", "pe": "ペ", "po": "ポ",
    "a": "ア", "i": "イ", "u": "ウ", "e": "エ", "o": "オ",
}  # fmt: skip
_KANA = {kana: romaji for romaji, kana in _SYLLABLES.items()} | {
    "ヂ": "ji",
    "ヅ": "zu",
    "ヴ": "vu",
    "ヰ": "i",
    "ヱ": "e",
}
_SMALL_VOWEL = {"ァ": "a", "ィ": "i", "ゥ": "u", "ェ": "e", "ォ": "o"}
_LONGEST = max(len(k) for k in _SYLLABLES)


def romaji_to_katakana(word: str) -> str | None:
    """``"Shiomi"`` → ``"シオミ"``; None when ``word`` is not Hepburn romaji (an English word, say)."""
    text, out, i = word.lower(), [], 0
    while i < len(text):
        char = text[i]
        if char == "n" and (i + 1 == len(text) or text[i + 1] not in "aiueoy"):
            out.append("ン")
            i += 1
            continue
        if i + 1 < len(text) and char == text[i + 1] and char not in "aiueon":
            out.append("ッ")  # a doubled consonant: Hokkaido, Sapporo
            i += 1
            continue
        for size in range(min(_LONGEST, len(text) - i), 0, -1):
            kana = _SYLLABLES.get(text[i : i + size])
            if kana:
                out.append(kana)
                i += size
                break
        else:
            return None
    return "".join(out)


def katakana_to_romaji(kana: str) -> str:
    """``"シオミセン"`` → ``"shiomisen"``: Hepburn, long vowels written once, ``ッ`` doubling the next consonant."""
    out: list[str] = []
    double = False
    i = 0
    while i < len(kana):
        pair, char = kana[i : i + 2], kana[i]
        if pair in _KANA:
            syllable, i = _KANA[pair], i + 2
        elif char == "ッ":
            double, i = True, i + 1
            continue
        elif char == "ン":
            syllable, i = "n", i + 1
        elif char == "ー":
            i += 1  # a long vowel: romanised names usually drop the macron
            continue
        elif char in _SMALL_VOWEL and out:
            out[-1] = out[-1][:-1] + _SMALL_VOWEL[char]  # フィ, ティ: fi, ti
            i += 1
            continue
        elif char in _KANA:
            syllable, i = _KANA[char], i + 1
        else:
            syllable, i = char, i + 1  # punctuation and anything else passes through
        if double and syllable[:1].isalpha() and syllable[0] not in "aiueo":
            syllable = ("t" if syllable.startswith("ch") else syllable[0]) + syllable
        double = False
        out.append(syllable)
    return "".join(out)
