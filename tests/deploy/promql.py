"""What a PromQL expression reads: its series selectors and the label names it groups or matches on.

Enough of PromQL's grammar for the queries kotae ships (dashboards, alert rules): strings
and comments are skipped, ``name{matchers}`` is a selector, ``by``/``without``/``on``/
``ignoring``/``group_left``/``group_right`` are followed by label names, an identifier
before ``(`` is a function or aggregation, ``offset 5m`` and ``[5m]`` are durations. The
static tests use it to check every query names an exported metric; the live test asks a
real Prometheus for each selector's series.

Example::

    >>> read('sum by (stage) (rate(kotae_messages_total{result!="ok"}[5m]))').selectors
    [Selector(metric='kotae_messages_total', matchers='result!="ok"')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
AGGREGATIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile",
}  # fmt: skip
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}

_TOKEN = re.compile(
    r"""
    \s*(?:
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<comment>\#[^\n]*)
  | (?P<range>\[[^\]]*\])
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<matchers>\{)
  | (?P<number>[0-9][0-9a-zA-Z._]*)
  | (?P<other>\S)
    )""",
    re.X,
)
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\')\s*,?')


@dataclass(frozen=True)
class Selector:
    """``metric{matchers}`` as written (matchers without the braces)."""

    metric: str
    matchers: str = ""

    def __str__(self) -> str:
        return f"{self.metric}{{{self.matchers}}}" if self.matchers else self.metric

    def label_names(self) -> set[str]:
        return {m.group(1) for m in _MATCHER.finditer(self.matchers)}


@dataclass
class Reading:
    """The selectors of one expression, in order, and the label names its operators name."""

    selectors: list[Selector] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)

    @property
    def metrics(self) -> set[str]:
        return {s.metric for s in self.selectors}


def _matchers(expr: str, start: int) -> tuple[str, int]:
    """The text between ``{`` at ``start`` and its ``}`` (strings may hold braces); the index after it."""
    i, quote = start + 1, ""
    while i < len(expr):
        ch = expr[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "}":
            return expr[start + 1 : i].strip(), i + 1
        i += 1
    raise ValueError(f"unclosed {{ at {start} in {expr!r}")


def _label_list(expr: str, start: int) -> tuple[set[str], int]:
    """Label names in ``( a, b )`` from ``start`` (spaces first); no list there: nothing."""
    match = re.compile(r"\s*\(([^)]*)\)").match(expr, start)
    if not match:
        return set(), start
    return {name.strip() for name in match.group(1).split(",") if name.strip()}, match.end()


def read(expr: str) -> Reading:
    """The selectors and grouping label names of ``expr``."""
    reading = Reading()
    pos = 0
    while pos < len(expr):
        token = _TOKEN.match(expr, pos)
        if token is None:  # only whitespace is left
            break
        kind, pos = token.lastgroup, token.end()
        text = token.group(kind or 0)
        if kind == "matchers":  # a selector without a name: {__name__=~"..."}
            matchers, pos = _matchers(expr, token.start(kind))
            reading.selectors.append(Selector("", matchers))
        elif kind == "ident":
            word = text
            if word in LABEL_LISTS:
                names, pos = _label_list(expr, pos)
                reading.grouping |= names
            elif word in KEYWORDS or word in AGGREGATIONS:
                continue
            elif re.compile(r"\s*\(").match(expr, pos):
                continue  # a function call
            else:
                brace = re.compile(r"\s*\{").match(expr, pos)
                matchers = ""
                if brace:
                    matchers, pos = _matchers(expr, brace.end() - 1)
                reading.selectors.append(Selector(word, matchers))
    return reading
