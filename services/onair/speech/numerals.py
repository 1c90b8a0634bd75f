"""Numbers as English words: cardinals, ordinals, years, decimals.

Japanese needs no such table here: every Japanese voice kotae speaks with
(Open JTalk, and VOICEVOX and AivisSpeech, which read through Open JTalk) reads
digits with their counters itself; what it misreads is handled in
:mod:`reading_ja`.
"""

from __future__ import annotations

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (10**3, "thousand"))
_ORDINAL_WORDS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip


def _below_thousand(n: int) -> str:
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words.append(f"{_ONES[hundreds]} hundred")
    if rest >= 20:
        tens, ones = divmod(rest, 10)
        words.append(_TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    elif rest or not hundreds:
        words.append(_ONES[rest])
    return " ".join(words)


def english_number(n: int) -> str:
    """``1250`` → ``'one thousand two hundred fifty'``; negative numbers say "minus"."""
    if n < 0:
        return "minus " + english_number(-n)
    if n < 1000:
        return _below_thousand(n)
    words = []
    for scale, name in _SCALES:
        if n >= scale:
            count, n = divmod(n, scale)
            words.append(f"{english_number(count)} {name}")
    if n:
        words.append(_below_thousand(n))
    return " ".join(words)


def english_ordinal(n: int) -> str:
    """``21`` → ``'twenty-first'``."""
    words = english_number(n)
    head, sep, last = words.rpartition("-") if "-" in words.split(" ")[-1] else words.rpartition(" ")
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + sep + last


def english_year(n: int) -> str:
    """A year as it is said: ``2027`` → ``'twenty twenty-seven'``, ``2005`` → ``'two thousand five'``."""
    if 2000 <= n <= 2009 or n % 1000 == 0 or not 1000 <= n <= 9999:
        return english_number(n)
    century, rest = divmod(n, 100)
    if rest == 0:
        return f"{english_number(century)} hundred"
    return f"{english_number(century)} {'oh ' + _ONES[rest] if rest < 10 else english_number(rest)}"


def english_decimal(text: str) -> str:
    """``'3.25'`` → ``'three point two five'``; the digits after the point are said one by one."""
    whole, _, fraction = text.partition(".")
    spoken = english_number(int(whole or "0"))
    if fraction:
        spoken += " point " + " ".join(_ONES[int(d)] for d in fraction)
    return spoken
