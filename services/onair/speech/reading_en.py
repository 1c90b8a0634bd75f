"""English text made readable for an English voice: numbers, dates, times, money, units and acronyms as words.

Japanese script left in an English answer (a name: ``汐見線``) is said in
romaji (``Shiomisen``), from Open JTalk's reading. Every figure is spelled out, so each voice (eSpeak NG, OpenAI's) says the same
thing: ``"$1,200"`` is "one thousand two hundred dollars" whatever the voice's
own number rules, a date is "January twenty-fourth, twenty twenty-seven", a
clock time "nine thirty", and an acronym a voice would read as a word is
spelled out letter by letter (``NHK`` → "N H K").
"""

from __future__ import annotations

import re

from .numerals import english_decimal, english_number, english_ordinal, english_year

MONTHS = "January February March April May June July August September October November December".split()
_NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"

# unit → (singular, plural); longest first in the pattern.
_UNITS = {
    "km²": ("square kilometer", "square kilometers"), "km2": ("square kilometer", "square kilometers"),
    "m²": ("square meter", "square meters"), "m2": ("square meter", "square meters"),
    "㎡": ("square meter", "square meters"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "kcal": ("kilocalorie", "kilocalories"),
    "km": ("kilometer", "kilometers"), "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"), "mL": ("milliliter", "milliliters"),
    "ml": ("milliliter", "milliliters"), "kW": ("kilowatt", "kilowatts"), "MW": ("megawatt", "megawatts"),
    "GB": ("gigabyte", "gigabytes"), "MB": ("megabyte", "megabytes"), "ha": ("hectare", "hectares"),
    "°C": ("degree Celsius", "degrees Celsius"), "℃": ("degree Celsius", "degrees Celsius"),
    "%": ("percent", "percent"), "m": ("meter", "meters"), "g": ("gram", "grams"), "L": ("liter", "liters"),
    "円": ("yen", "yen"), "yen": ("yen", "yen"),
}  # fmt: skip
_UNIT = re.compile(
    rf"({_NUMBER})\s*({'|'.join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))})(?![A-Za-z])"
)
_CURRENCY = {"$": ("dollar", "dollars"), "¥": ("yen", "yen"), "￥": ("yen", "yen"), "€": ("euro", "euros"),
             "£": ("pound", "pounds")}  # fmt: skip
_CURRENCY_BEFORE = re.compile(rf"([$¥￥€£])\s*({_NUMBER})(?:\s*(million|billion|thousand))?")
_DAY_RANGE = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s*(?:-|–|to)\s*(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?=(?:{'|'.join(MONTHS)})\b)"
)
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff々〆ヵヶ]+")
_ISO_DATE = re.compile(r"(?<![\d-])(\d{4})-(\d{1,2})-(\d{1,2})(?![\d-])")
_MONTH_NAME = "|".join(MONTHS + [m[:3] + r"\.?" for m in MONTHS])
_MONTH_DAY = re.compile(rf"\b({_MONTH_NAME})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(,?\s*(\d{{4}}))?")
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_NAME})\b(,?\s*(\d{{4}}))?")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_NAME})(,?\s+)(\d{{4}})\b")
_YEAR_AFTER = re.compile(
    r"\b(in|since|by|until|till|from|before|after|during|through|of|year|fiscal|FY)(\s+)(1[1-9]\d\d|20\d\d)\b(?!\s*(?:yen|people|%))",
    re.I,
)
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\.?(?!\w))?", re.I)
_AM_PM = re.compile(r"(?<=\d)\s*([ap])\.?m\.?(?![a-z])", re.I)
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b")
_RANGE = re.compile(r"(?<=\d)\s*(?:[-–〜～~]|to)\s*(?=[$¥]?\d)")
_PLAIN = re.compile(rf"(?<![\w.]){_NUMBER}(?![\w])")
_ACRONYM = re.compile(r"\b([A-Z]{2,6})(s?)\b")
# A model or product code mixing capitals and figures ("R7", "PS5", "SRB-R7", "3D"): letters spelled, figures said.
_CODE = re.compile(r"\b(?=[A-Z\d-]*\d)(?=[A-Z\d-]*[A-Z])[A-Z\d]+(?:-[A-Z\d]+)*\b")
_CODE_PART = re.compile(r"[A-Z]+|\d+")
_VOWELS = set("AEIOU")


def _is_one(number: str) -> bool:
    return number.replace(",", "") in ("1", "1.0")


def _amount(number: str) -> str:
    plain = number.replace(",", "")
    return english_decimal(plain) if "." in plain else english_number(int(plain))


def _month(name: str) -> str:
    return next(m for m in MONTHS if m.lower().startswith(name.rstrip(".").lower()[:3]))


def _month_day(match: re.Match[str]) -> str:
    spoken = f"{_month(match.group(1))} {english_ordinal(int(match.group(2)))}"
    if match.group(4):
        spoken += f", {english_year(int(match.group(4)))}"
    return spoken


def _day_month(match: re.Match[str]) -> str:
    day = int(match.group(1))
    if not 1 <= day <= 31:
        return match.group(0)
    spoken = f"the {english_ordinal(day)} of {_month(match.group(2))}"
    if match.group(4):
        spoken += f", {english_year(int(match.group(4)))}"
    return spoken


def _iso_date(match: re.Match[str]) -> str:
    year, month, day = (int(g) for g in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return match.group(0)
    return f"{MONTHS[month - 1]} {english_ordinal(day)}, {english_year(year)}"


def _clock(hour: int, minute: int, meridiem: str | None) -> str:
    """``(20, 0, None)`` → ``"eight P M"``; a 24-hour time is said on the 12-hour clock."""
    if meridiem is None and hour >= 13:
        hour, meridiem = hour - 12, "p"
    if meridiem is None and minute == 0:
        if hour in (0, 24):
            return "midnight"
        return "noon" if hour == 12 else f"{english_number(hour)} o'clock"
    spoken = english_number(hour or 12)
    if minute:
        spoken += f" oh {english_number(minute)}" if minute < 10 else f" {english_number(minute)}"
    return spoken + (f" {meridiem.upper()} M" if meridiem else "")


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 24 or minute > 59:
        return match.group(0)
    spoken = _clock(hour, minute, match.group(3).lower() if match.group(3) else None)
    # "8:00 p.m." at the end of a sentence: its last dot ends the sentence too.
    ends_sentence = re.match(r"\s*(?:$|[A-Z])", match.string[match.end() :]) is not None
    return spoken + ("." if match.group(0).endswith(".") and ends_sentence else "")


def _romaji(match: re.Match[str]) -> str:
    """Japanese script (a name kept as written) in romaji, which an English voice can say."""
    from .kana import katakana_to_romaji
    from .openjtalk import reading

    return katakana_to_romaji(reading(match.group(0))).capitalize()


def _spell(match: re.Match[str]) -> str:
    word, plural = match.group(1), match.group(2)
    if len(word) >= 4 and _VOWELS & set(word):
        return match.group(0)  # NASA, UNESCO: said as words
    return " ".join(word) + ("'s" if plural else "")


def _code(match: re.Match[str]) -> str:
    """``"SRB-R7"`` → ``"S R B R seven"``: how a person reads a model code aloud."""
    said = []
    for part in _CODE_PART.findall(match.group(0)):
        if part.isdigit():
            said.append(english_number(int(part)))
        else:  # a pronounceable word inside a code ("COVID-19") is said as the acronym rule says it
            said.append(part if len(part) >= 4 and _VOWELS & set(part) else " ".join(part))
    return " ".join(said)


def read_english(text: str) -> str:
    """``"Polls open 7:00-20:00 on 2027-01-24; the fare is ¥150"`` → words a voice says as a person would."""
    text = _JAPANESE.sub(_romaji, text)
    text = _ISO_DATE.sub(_iso_date, text)
    text = _DAY_RANGE.sub(
        lambda m: f"the {english_ordinal(int(m.group(1)))} to the {english_ordinal(int(m.group(2)))} of ", text
    )
    text = _MONTH_DAY.sub(_month_day, text)
    text = _DAY_MONTH.sub(_day_month, text)
    text = _MONTH_YEAR.sub(lambda m: _month(m.group(1)) + m.group(2) + english_year(int(m.group(3))), text)
    text = _YEAR_AFTER.sub(lambda m: m.group(1) + m.group(2) + english_year(int(m.group(3))), text)
    text = _RANGE.sub(" to ", text)
    text = _TIME.sub(_time, text)
    text = _AM_PM.sub(lambda m: f" {m.group(1).upper()} M", text)
    text = _CURRENCY_BEFORE.sub(
        lambda m: (
            _amount(m.group(2))
            + (f" {m.group(3)}" if m.group(3) else "")
            + " "
            + _CURRENCY[m.group(1)][0 if _is_one(m.group(2)) and not m.group(3) else 1]
        ),
        text,
    )
    text = _UNIT.sub(lambda m: f"{_amount(m.group(1))} {_UNITS[m.group(2)][0 if _is_one(m.group(1)) else 1]}", text)
    text = _ORDINAL.sub(lambda m: english_ordinal(int(m.group(1))), text)
    text = _CODE.sub(_code, text)  # after amounts and units ("20MW", "5GB" are not codes)
    text = _PLAIN.sub(lambda m: _amount(m.group(0)), text)
    return _ACRONYM.sub(_spell, text)
