"""What a real chat model replies, read into what a stage asked for.

A hosted frontier model answers in the shape a prompt asks for; a small local one
(seen on Qwen2.5-Coder-1.5B-Instruct through llama.cpp, scripts/real-model.sh) does not
reliably: it wraps JSON in a code fence or adds a sentence after it, writes numbers as
strings (``"ids": ["2", "1"]``), cites ``【1】``, ``[1, 2]`` or ``[資料1]`` instead of ``[1]``,
drifts from Japanese into Chinese characters, replies with nothing, or runs on until
``max_tokens`` cuts it. Every stage reads its replies through this module, so each of
those is handled once, the same way for every stage:

* :func:`json_object` — the JSON object in a reply, whatever surrounds it;
* :func:`number_list` — ids or block numbers, as ints, however they were written;
* :func:`as_int` / :func:`as_bool` — one scalar field, tolerant of its usual spellings;
* :func:`citation_markers` — every citation variant rewritten as ``[N]``;
* :func:`foreign_characters` — characters that do not belong to the answer's language.

What cannot be read raises :class:`~kotae.providers.BadReply` with what was wrong, so the
stage can ask again, degrade (named) or fail closed — never guess a verdict.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from typing import Any

from kotae.language import lexicon
from kotae.providers import BadReply

#: A fenced block anywhere in the reply (```json … ```), its body captured.
_FENCED = re.compile(r"```[ \t]*[A-Za-z]*[ \t]*\n?(.*?)(?:```|$)", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_SMART_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "＂": '"'})


def _preview(text: str) -> str:
    return repr(text[:120]) + ("…" if len(text) > 120 else "")


def _decode_at(text: str, start: int) -> Any:
    """The JSON value that starts at ``text[start]`` (trailing text ignored), or None."""
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return None
    return value


def _first(text: str, kind: type) -> Any:
    """The first JSON value of ``kind`` (dict or list) that starts somewhere in ``text``, or None."""
    for m in re.finditer(r"\{" if kind is dict else r"\[", text):
        value = _decode_at(text, m.start())
        if isinstance(value, kind):
            return value
    return None


def _almost_json(text: str) -> str:
    """Smart quotes made straight and trailing commas dropped: what a model gets wrong most often."""
    return _TRAILING_COMMA.sub(r"\1", text.translate(_SMART_QUOTES))


def _python_literal(text: str) -> Any:
    """``{'ids': [1, 2]}`` or ``{"ok": True}``: a Python literal (read, never evaluated as code), or None."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return ast.literal_eval(text[start : end + 1])
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def _read(body: str, list_key: str | None) -> Any:
    """The object in one candidate body of a reply, trying the readings from strictest to loosest."""
    readings = (
        lambda: _decode_at(body, 0),
        lambda: _first(body, dict),
        lambda: _first(_almost_json(body), dict),
        lambda: _python_literal(body),
    )
    for reading in readings:
        value = reading()
        if isinstance(value, dict):
            return value
    if list_key:
        value = _first(_almost_json(body), list)
        if value is not None:
            return {list_key: value}
    return None


def json_object(text: str, *, list_key: str | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    """The JSON object a model replied with, however it was wrapped.

    Read in this order, in the whole reply and then in the body of each code fence: the
    reply as it is; the first object in it (words before or after ignored); the same after
    an almost-JSON repair (smart quotes, trailing commas); a Python dict. ``list_key``: a bare
    JSON array is read as ``{list_key: array}`` (a reply of ``[2, 1]`` to "reply {"ids": …}").
    ``finish_reason`` (``"length"``: cut at ``max_tokens``) is named in the error.

    Example::

        >>> json_object('Here you are:\\n```json\\n{"ids": ["2", 1]}\\n```\\nHope it helps.')
        {'ids': ['2', 1]}
        >>> json_object("[3, 1]", list_key="ids")
        {'ids': [3, 1]}
    """
    stripped = text.strip()
    cut = " (cut at max_tokens)" if finish_reason == "length" else ""
    if not stripped:
        raise BadReply(f"empty reply{cut}")
    for body in [stripped, *(m.group(1).strip() for m in _FENCED.finditer(stripped))]:
        value = _read(body, list_key)
        if value is not None:
            return value
    raise BadReply(f"no JSON object in the reply{cut}: {_preview(text)}")


_NUMBER_TEXT = re.compile(r"^\D{0,12}?(\d{1,4})\D{0,6}$")


def as_int(value: Any) -> int | None:
    """An integer written as one: ``2``, ``2.0``, ``"2"``, ``"[2]"``, ``"#2"``, ``"資料2"``, ``"2番"``; else None.

    A bool is not a number here (``true`` is no block number), nor is a string with two numbers in it.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        m = _NUMBER_TEXT.match(unicodedata.normalize("NFKC", value).strip())
        return int(m.group(1)) if m else None
    return None


def number_list(raw: Any, count: int, *, key: str) -> list[int]:
    """The distinct numbers in 1..``count`` that ``raw`` lists, in its order.

    Items are read with :func:`as_int`; an item that is an object is read by its
    ``id``/``n``/``number`` field. Numbers out of range are dropped (a model that counts
    from 0 or invents one). A list that names items but not one readable in range is a
    :class:`BadReply`: taking it for "none" would drop a comment on a misreading.

    Example::

        >>> number_list(["2", 1, "[3]", 9, 2], 3, key="ids")
        [2, 1, 3]
    """
    if isinstance(raw, (str, int)) and not isinstance(raw, bool):
        raw = [raw]  # "ids": 2 or "ids": "2, 1"
    if not isinstance(raw, list):
        raise BadReply(f"{key!r} must be a list of numbers, got {type(raw).__name__}")
    items: list[Any] = []
    for item in raw:
        if isinstance(item, dict):
            item = next((item[k] for k in ("id", "n", "number", "index") if k in item), None)
        if isinstance(item, str) and re.search(r"\d\D+\d", item):
            items += re.findall(r"\d+", unicodedata.normalize("NFKC", item))  # "1, 3" in one string
        else:
            items.append(item)
    picked: list[int] = []
    for item in items:
        n = as_int(item)
        if n is not None and 1 <= n <= count and n not in picked:
            picked.append(n)
    if raw and not picked:
        raise BadReply(f"{key!r} names no number between 1 and {count}: {str(raw)[:80]}")
    return picked


_TRUE = lexicon.words("reply_true")
_FALSE = lexicon.words("reply_false")
# The empty string is not a word a list can hold: it is null too.
_NULL = lexicon.words("reply_null") | {""}


def as_bool(value: Any, key: str) -> bool | None:
    """``true``/``false``/``null``, also written as ``"true"``, ``"yes"``/``"no"``, ``"はい"``/``"いいえ"``."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        if word in _NULL:
            return None
    raise BadReply(f"{key!r} must be true, false or null, got {value!r}")


# --- citations -------------------------------------------------------------------

#: Brackets a model puts around a block number: [1] ［1］ 【1】 〔1〕 〈1〉, with an optional word before it.
_CITE_WORDS = lexicon.alternation("reply_citation_words")
_CITE_GROUP = re.compile(
    r"[\[［【〔〈]\s*\^?\s*"
    rf"(?:(?:{_CITE_WORDS})\s*(?:番号)?\s*[:：#＃]?\s*)?"
    r"(\d{1,2}(?:\s*(?:[,，、・/]|and|-|〜|~|–)\s*\d{1,2})*)\s*[\]］】〕〉]",
    re.I,
)
#: "…です。[1]" → "…です[1]。": a marker after the full stop belongs to the sentence before it.
_AFTER_STOP = re.compile(r"([。．！？])((?:\[\d+\])+)")


def _numbers_in(group: str) -> list[int]:
    """1, 2 / 1・2 / 1-3 (a range) → the numbers, in order."""
    out: list[int] = []
    for a, sep, b in re.findall(r"(\d+)(?:\s*(-|〜|~|–)\s*(\d+))?", group):
        if sep and b and int(a) <= int(b) <= int(a) + 9:
            out += range(int(a), int(b) + 1)
        else:
            out.append(int(a))
    return out


def citation_markers(text: str) -> str:
    """``text`` with every citation variant a model writes as kotae's ``[N]`` markers.

    Full-width digits and brackets, lenticular brackets (``【1】``), lists (``[1, 2]``,
    ``[1・2]``), ranges (``[1-3]``), a word before the number (``[資料1]``, ``[Document 2]``,
    ``[^1]``); in Japanese a marker after the full stop moves before it. A 【label】 that holds
    words (a title) is left as it is.

    Example::

        >>> citation_markers("保育料は無料です。【1】バスは100円です［２、３］。")
        '保育料は無料です[1]。バスは100円です[2][3]。'
    """

    def one(m: re.Match[str]) -> str:
        return "".join(f"[{n}]" for n in _numbers_in(m.group(1)))

    out = _CITE_GROUP.sub(one, _full_width_digits(text))
    return _AFTER_STOP.sub(r"\2\1", out)


def _full_width_digits(text: str) -> str:
    """Full-width digits become ASCII (［２］ → ［2］); the rest of the text stays as the model wrote it."""
    return re.sub(r"[０-９]", lambda m: unicodedata.normalize("NFKC", m.group(0)), text)


# --- scripts ---------------------------------------------------------------------


def _is_ideograph(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith("CJK UNIFIED IDEOGRAPH")


def _foreign_to_japanese(ch: str) -> bool:
    """A character no Japanese text is written with: Hangul, or an ideograph outside JIS (simplified Chinese)."""
    if "HANGUL" in unicodedata.name(ch, ""):
        return True
    if not _is_ideograph(ch):
        return False
    try:
        ch.encode("cp932")
    except UnicodeEncodeError:
        return True
    return False


def foreign_characters(text: str, lang: str, evidence: str = "") -> list[str]:
    """The characters of ``text`` that do not belong to an answer in ``lang`` (and are not in ``evidence``).

    Japanese: Hangul and ideographs outside the JIS sets (这, 们, 费: the simplified Chinese a
    small multilingual model drifts into). English: any kana, ideograph or Hangul — unless the
    evidence holds it (a Japanese name quoted in an English answer).

    Example::

        >>> foreign_characters("这个保育料は免费です", "ja")
        ['这', '费']
    """
    seen: list[str] = []
    for ch in text:
        if ch in seen or ch in evidence:
            continue
        if lang == "ja":
            foreign = _foreign_to_japanese(ch)
        else:
            name = unicodedata.name(ch, "")
            foreign = name.startswith(("HIRAGANA", "KATAKANA", "CJK UNIFIED", "HANGUL"))
        if foreign:
            seen.append(ch)
    return seen


# --- one line ----------------------------------------------------------------------

#: "Query:", "検索クエリ：", "Rewritten query -" before the line a prompt asked for.
_LABEL_WORDS = lexicon.alternation("reply_label_words")
_LABEL = re.compile(rf"^\s*(?:[A-Za-z][A-Za-z ]{{0,24}}|[^\s:：]{{0,6}}(?:{_LABEL_WORDS}))\s*[:：]\s*(?=\S)")
_QUOTES = "「」『』\"'“”`"


def one_line(text: str) -> str:
    """The one line a prompt asked for: the reply's first non-empty line outside a code fence, without
    quotes around it or a label before it (``検索クエリ：…``, ``Query: …``), whitespace collapsed.

    Example::

        >>> one_line('検索クエリ：「保育料の上限はいくらですか」\\n\\n(チャットの「いくら」を補いました)')
        '保育料の上限はいくらですか'
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("```")]
    if not lines:
        return ""
    line = lines[0]
    label = _LABEL.match(line)
    if label and not re.match(r"^\s*https?:", line):
        line = line[label.end() :]
    return " ".join(line.split()).strip(_QUOTES + " ")


# --- asking again ------------------------------------------------------------------


def again(user: str, problem: str) -> str:
    """The user message of a re-ask: the same request, told what was wrong with the reply before.

    Asking the very same thing again at temperature 0 gets the very same reply from a local
    model; naming the problem is what changes it.

    Example::

        >>> again("Question: …", "no JSON object in the reply").endswith("follow the rules exactly.")
        True
    """
    return (
        f"{user}\n\n"
        f"Your previous reply could not be used ({problem[:200]}). "
        "直前の返答は使えませんでした。Reply again and follow the rules exactly."
    )
