"""Japanese text made readable for a Japanese voice: what Open JTalk would otherwise misread.

Open JTalk reads digits with their counters well (``1,800万枚``, ``2027年1月24日``,
``3.5km``); it misreads clock times (``10:30`` as "十、三十"), slashed dates,
ranges with 〜, currency signs before the amount, a few units, era
abbreviations (``R7年度``), and spells out every Latin-script word it does not
know (``DX``, ``VTuber``, ``Minato``: :mod:`latin_ja`). Those are rewritten here
into what a person would say; everything else is left to the voice.
"""

from __future__ import annotations

import re

from .latin_ja import WORD, latin_katakana

_NUMBER = r"\d[\d,]*(?:\.\d+)?"

# Longest first, so "km2" wins over "km" and "mL" over "m".
_UNITS = {
    "km²": "平方キロメートル", "km2": "平方キロメートル", "m²": "平方メートル", "m2": "平方メートル",
    "㎡": "平方メートル", "km/h": "キロメートル毎時", "kWh": "キロワットアワー", "kcal": "キロカロリー",
    "Mbps": "メガビーピーエス", "Gbps": "ギガビーピーエス", "km": "キロメートル", "cm": "センチメートル",
    "mm": "ミリメートル", "kg": "キログラム", "mg": "ミリグラム", "mL": "ミリリットル", "ml": "ミリリットル",
    "kW": "キロワット", "MW": "メガワット", "GW": "ギガワット", "GB": "ギガバイト", "MB": "メガバイト",
    "TB": "テラバイト", "ha": "ヘクタール", "°C": "度", "℃": "度", "%": "パーセント", "m": "メートル",
    "g": "グラム", "t": "トン", "L": "リットル", "ℓ": "リットル",
}  # fmt: skip
_UNIT = re.compile(
    rf"({_NUMBER})\s*({'|'.join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))})(?![A-Za-z])"
)
_CURRENCY = {"¥": "円", "￥": "円", "$": "ドル", "€": "ユーロ", "£": "ポンド"}
_CURRENCY_BEFORE = re.compile(rf"([¥￥$€£])\s*({_NUMBER})(万|億|千)?")
_ERAS = {"R": "令和", "H": "平成", "S": "昭和"}

_FULL_DATE = re.compile(r"(?<![\d/.-])(\d{4})[/.-](\d{1,2})[/.-](\d{1,2})(?![\d/.-])")
_YEAR_MONTH = re.compile(r"(?<![\d/.-])(\d{4})/(\d{1,2})(?![\d/.-])")
_MONTH_DAY = re.compile(r"(?<![\d/.])(\d{1,2})/(\d{1,2})(?![\d/.])")
_WEEKDAY = re.compile(r"[(（]\s*([月火水木金土日])(?:曜日?)?\s*[)）]")
_HOLIDAY = re.compile(r"[(（]\s*祝\s*[)）]")
_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])")
_TIME_RANGE = re.compile(r"(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})")
# A ratio ("21:9", "16:9", "4:3"): its second figure is one digit, so it is no clock time (which "25:30" is).
_RATIO = re.compile(r"(?<![\d:])(\d{1,3}):(\d)(?![\d:])")
_RANGE = re.compile(r"\s*[〜～~]\s*(?=[\d¥￥$€£]|[A-Z]?\d)")
_OPEN_RANGE = re.compile(r"(?<=[\d時分日月年])\s*[〜～~][ \t]*(?![\d \t])")
_NUMBER_DASH = re.compile(r"(?<![\d-])(\d+)((?:-\d+)+)(?![\d-])")
_ERA = re.compile(r"(?<![A-Za-z])([RHS])(\d{1,2})(?=年)")


def _date(year: str | None, month: str, day: str | None) -> str | None:
    if not 1 <= int(month) <= 12 or (day is not None and not 1 <= int(day) <= 31):
        return None
    return (f"{int(year)}年" if year else "") + f"{int(month)}月" + (f"{int(day)}日" if day else "")


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 24 or minute > 59:
        return match.group(0)
    return f"{hour}時" + (f"{minute}分" if minute else "")


def read_japanese(text: str) -> str:
    """Japanese text with what Open JTalk misreads rewritten.

    ``"受付は9:00〜17:00、R7年度のDX予算は¥1,200万"`` →
    ``"受付は9時から17時、令和7年度のディーエックス予算は1,200万円"``.
    """
    text = _FULL_DATE.sub(lambda m: _date(*m.groups()) or m.group(0), text)
    text = _YEAR_MONTH.sub(lambda m: _date(m.group(1), m.group(2), None) or m.group(0), text)
    text = _MONTH_DAY.sub(lambda m: _date(None, *m.groups()) or m.group(0), text)
    text = _WEEKDAY.sub(lambda m: f"{m.group(1)}曜日", text)
    text = _HOLIDAY.sub("祝日", text)
    text = _TIME_RANGE.sub(r"\1〜\2", text)
    text = _TIME.sub(_time, text)
    text = _RATIO.sub(r"\1対\2", text)
    text = _RANGE.sub("から", text)
    text = _OPEN_RANGE.sub("から", text)  # "20:00〜 配信": from eight o'clock
    text = _NUMBER_DASH.sub(lambda m: m.group(1) + m.group(2).replace("-", "の"), text)
    text = _CURRENCY_BEFORE.sub(lambda m: m.group(2) + (m.group(3) or "") + _CURRENCY[m.group(1)], text)
    text = _UNIT.sub(lambda m: m.group(1) + _UNITS[m.group(2)], text)
    text = _ERA.sub(lambda m: _ERAS[m.group(1)] + m.group(2), text)
    text = WORD.sub(lambda m: latin_katakana(m.group(0)), text)
    text = re.sub(r"\s*[&＆]\s*", "アンド", text)
    text = re.sub(r"(?<=\d)\s*[×x]\s*(?=\d)", "かける", text)
    text = re.sub(r"[#＃](?=\S)", "ハッシュタグ ", text)
    text = re.sub(r"(?<!\d)\s*[/:]\s*(?!\d)", "、", text)  # "10名/B賞", "324円:北海道産": a pause
    return re.sub(r"、+(?=[、。」）)]|$)", "", re.sub(r"、{2,}", "、", text))
