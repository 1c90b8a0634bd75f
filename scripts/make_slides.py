"""Draw the slide image of every record of a knowledge base folder: its title and its key figures.

    python scripts/make_slides.py                      # the bundled sample: kotae/samples/kb
    python scripts/make_slides.py path/to/kb --out slides

Each record named ``<id>`` gets ``<out>/<id>.png`` (1280x720): the title (an FAQ
entry's question), the page it comes from, and up to three figures read from its
text, each with what it counts ("大人1回 150円", "定員 +840人", "62か所 → 80か所").
The bundled sample's records name these files in ``slide_image``, so ``kotae demo
--onair`` and the overlay show them. Run it again after editing a document.

Japanese needs a font with its glyphs: the one of ``matplotlib-fontja``
(``pip install 'kotae[slides]'``), or any installed font that covers kana and kanji.
The output is the same for the same input (no timestamps in the files).
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from PIL import Image  # noqa: E402

from kotae.knowledge.records import KBRecord, load_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_KB = ROOT / "kotae" / "samples" / "kb"
WIDTH, HEIGHT, DPI = 12.8, 7.2, 100
INK, ACCENT, PAPER, CARD, MUTED = "#1d2a44", "#e0663b", "#f7f5f0", "#ffffff", "#6b7280"

# A figure: digits (with 万/億/千 groups, commas, decimals) and the unit that follows.
_JA_UNITS: dict[str, int] = {  # how much a card says with it: amounts first, then counts, times, ages
    "円": 4, "%": 4, "％": 4,
    "人": 3, "か所": 3, "箇所": 3, "カ所": 3, "本": 3, "基": 3, "件": 3, "校": 3, "台": 3, "世帯": 3, "戸": 3,
    "分": 2, "時間": 2, "日分": 2, "メートル": 2, "km": 2,
    "歳": 1, "回": 1, "倍": 1,
}  # fmt: skip
_JA_NUMBER = r"\d[\d,.]*(?:[万億千百]\d*)*[万億千百]?"
_JA_UNIT = "|".join(sorted(map(re.escape, _JA_UNITS), key=len, reverse=True))
_JA_FIGURE = re.compile(rf"(?P<n>{_JA_NUMBER})\s*(?P<u>{_JA_UNIT})")
_JA_FROM_TO = re.compile(
    rf"(?P<a>{_JA_NUMBER}\s*(?:{_JA_UNIT}))から[^、。]{{0,14}}?(?P<b>{_JA_NUMBER}\s*(?:{_JA_UNIT}))"
)
_EN_UNITS: dict[str, int] = {
    "yen": 4, "%": 4, "percent": 4,
    "people": 3, "children": 3, "places": 3, "shelters": 3, "stations": 3, "nurseries": 3, "buses": 3,
    "designated evacuation sites": 3, "sites": 3, "towers": 3, "metres": 2,
    "times": 2, "hours": 2, "minutes": 2, "days": 2, "months": 2, "a.m.": 2, "p.m.": 2,
}  # fmt: skip
_EN_AMOUNT = r"[¥$]\s?\d[\d,]*(?:\.\d+)?|\d{1,2}:\d{2}\s?[ap]\.m\.|\d[\d,]*(?:\.\d+)?"
_EN_FIGURE = re.compile(
    rf"(?P<n>{_EN_AMOUNT})(?:\s?(?P<u>yen|%|percent|people|children|places|shelters|stations|nurseries|buses|designated evacuation sites|sites|towers|metres|times|hours|minutes|days|months))?",
    re.I,
)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_EN_FROM_TO = re.compile(
    rf"from (?P<a>{_EN_AMOUNT})(?: \w+)? to (?P<b>{_EN_AMOUNT}(?:\s?(?:yen|%|times|people|places|{_MONTHS}))?)", re.I
)
_JA_LEADING_TIME = re.compile(r"^(?:\d{4}年(?:\d{1,2}月)?(?:\d{1,2}日)?(?:度)?(?:春|夏|秋|冬)?(?:までに|から|に|で)?)")
_JA_TRAILING = re.compile(r"(?:は|を|が|に|の|で|と|から|まで|月額|年間|約|全|1日|1回あたり|あたり)+$")


@dataclass(frozen=True)
class Figure:
    """One number worth a card: the value (or 'before → after') and what it counts."""

    value: str
    label: str


def japanese_font() -> str | None:
    """The family of a font with Japanese glyphs: matplotlib-fontja's, else an installed one."""
    try:
        import matplotlib_fontja  # noqa: F401  (registers IPAexGothic with matplotlib)

        return "IPAexGothic"
    except ImportError:
        pass
    for entry in font_manager.fontManager.ttflist:
        if any(
            word in entry.name for word in ("Noto Sans CJK", "Noto Sans JP", "IPAexGothic", "IPAGothic", "VL Gothic")
        ):
            return entry.name
    return None


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[。！？!?])\s*|(?<=\.)\s+(?=[A-Z])|\n+", text)
    return [p.strip() for p in parts if p and p.strip() and not p.strip().startswith("#")]


def _shorten_ja(phrase: str) -> str:
    phrase = _JA_TRAILING.sub("", _JA_LEADING_TIME.sub("", phrase.strip())).strip("、 ")
    if len(phrase) > 16 and "の" in phrase[:-1]:
        tail = phrase.rsplit("の", 1)[-1]
        phrase = tail if len(tail) >= 3 else phrase
    return phrase if len(phrase) <= 18 else phrase[-16:]


def _label_ja(sentence: str, start: int) -> str:
    """What a figure counts: the sentence's topic (before は), else the words of its clause before it."""
    head = sentence[:start]
    first = head.split("、", 1)[0]
    if "は" in first and first.index("は") <= 16:
        return _shorten_ja(first[: first.index("は")])
    if "から" in sentence[start : start + 24] and "、" in head:  # 'X を、現在の 62か所から …': X is what moved
        return _shorten_ja(first)
    clause = _shorten_ja(head.rsplit("、", 1)[-1])
    if len(clause) >= 2:
        return clause
    return _shorten_ja(first)


def _label_en(sentence: str, start: int) -> str:
    words = re.sub(r"[^\w\s'-]", " ", sentence[:start]).split()
    if words[:1] and words[0].lower() in ("in", "on", "by", "from") and len(words) > 4:
        words = words[3:]  # a leading "In April 2026," says when, not what
    drop = {
        "from",
        "to",
        "at",
        "of",
        "is",
        "are",
        "the",
        "a",
        "an",
        "by",
        "for",
        "on",
        "in",
        "and",
        "runs",
        "will",
        "open",
    }
    while words and words[-1].lower() in drop:
        words.pop()
    return " ".join(words[:6])


def _best(sentence: str, english: bool) -> tuple[int, int, str] | None:
    """(priority, start, value) of the sentence's most telling figure."""
    moved = (_EN_FROM_TO if english else _JA_FROM_TO).search(sentence)
    if moved:
        return 5, moved.start(), f"{moved['a'].strip()} → {moved['b'].strip()}"
    best: tuple[int, int, str] | None = None
    for match in (_EN_FIGURE if english else _JA_FIGURE).finditer(sentence):
        number, unit = match["n"], (match["u"] or "")
        if english:
            if number.startswith(("¥", "$")):
                rank = 4
            elif ":" in number:
                rank = 2
            else:
                rank = _EN_UNITS.get(unit.lower(), 0)
        else:
            rank = _JA_UNITS.get(unit, 0)
        if rank and (best is None or rank > best[0]):
            best = (rank, match.start(), match.group(0).strip())
    return best


def figures(record: KBRecord, limit: int = 3) -> list[Figure]:
    """Up to ``limit`` figures of the record, one a sentence: the most telling ones, in the order the text gives them."""
    text = record.text if record.kind == "doc" else record.answer
    english = record.language == "en"
    found: list[tuple[int, int, Figure]] = []
    for order, sentence in enumerate(sentences(text or "")):
        best = _best(sentence, english)
        if best is None:
            continue
        rank, start, value = best
        label = (_label_en if english else _label_ja)(sentence, start)
        found.append((rank, order, Figure(value, label)))
    chosen = sorted(found, key=lambda item: (-item[0], item[1]))[:limit]
    return [figure for _, _, figure in sorted(chosen, key=lambda item: item[1])]


def _wrap(text: str, width: int) -> str:
    if " " in text:  # words
        lines, line = [], ""
        for word in text.split():
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
        return "\n".join(lines[:3])
    return "\n".join(text[i : i + width] for i in range(0, min(len(text), width * 3), width))


def draw(record: KBRecord, out: Path, font: str | None) -> None:
    """One slide: title band, source and page, the figure cards."""
    if font:
        plt.rcParams["font.family"] = [font, "DejaVu Sans"]
    fig = plt.figure(figsize=(WIDTH, HEIGHT), dpi=DPI, facecolor=PAPER)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1280)
    ax.set_ylim(720, 0)
    ax.axis("off")
    ax.add_patch(FancyBboxPatch((0, 0), 1280, 170, boxstyle="square,pad=0", facecolor=INK, edgecolor="none"))
    ax.add_patch(FancyBboxPatch((0, 170), 1280, 8, boxstyle="square,pad=0", facecolor=ACCENT, edgecolor="none"))
    title = record.title if record.kind == "doc" else (record.question or record.title)
    english = record.language == "en"
    ax.text(60, 92, _wrap(title, 44 if english else 26), color="white", fontsize=34, va="center")
    page = f"slide {record.slide}" if record.slide is not None else ""
    meta = "  ·  ".join(part for part in (record.source or "", page) if part)
    ax.text(60, 150, meta, color="#c9d2e3", fontsize=15, va="center")
    cards = figures(record)
    if not cards:  # a record without numbers: its first sentences, as points
        points = sentences(record.text if record.kind == "doc" else record.answer or "")[:3] or [title]
        for i, point in enumerate(points):
            y = 270 + i * 130
            ax.add_patch(
                FancyBboxPatch((70, y + 8), 16, 16, boxstyle="square,pad=0", facecolor=ACCENT, edgecolor="none")
            )
            ax.text(110, y, _wrap(point, 64 if english else 34), color=INK, fontsize=22, va="top", linespacing=1.5)
    gap, left, top, height = 40, 60, 250, 330
    width = (1280 - 2 * left - gap * (len(cards) - 1)) / max(1, len(cards))
    for i, figure in enumerate(cards):
        x = left + i * (width + gap)
        ax.add_patch(
            FancyBboxPatch(
                (x, top), width, height, boxstyle="round,pad=0,rounding_size=18",
                facecolor=CARD, edgecolor="#d9d4c7", linewidth=1.5,
            )
        )  # fmt: skip
        ax.add_patch(FancyBboxPatch((x, top), 12, height, boxstyle="square,pad=0", facecolor=ACCENT, edgecolor="none"))
        before, arrow, value = figure.value.rpartition(" → ")
        if arrow:  # what it was, small, above what it becomes
            ax.text(x + 40, top + 70, f"{before} →", color=MUTED, fontsize=22, va="center")
        size = 44 if len(value) <= 5 else 36 if len(value) <= 8 else 28
        ax.text(x + 40, top + 140, _wrap(value, 16), color=INK, fontsize=size, va="center")
        label = _wrap(figure.label, 24 if english else 13)
        ax.text(x + 40, top + 250, label, color=MUTED, fontsize=18, va="center", linespacing=1.5)
    ax.text(1220, 690, record.version and f"v{record.version}" or "", color=MUTED, fontsize=12, ha="right", va="center")
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, facecolor=PAPER)
    plt.close(fig)
    # A slide has few colours: a 64-colour palette keeps it sharp at a third of the size.
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kb", nargs="?", default=str(SAMPLE_KB), help="a knowledge-base folder (default: the sample)")
    parser.add_argument("--out", default=None, help="where the images go (default: <kb>/slides)")
    args = parser.parse_args(argv)
    kb = Path(args.kb)
    out = Path(args.out) if args.out else kb / "slides"
    font = japanese_font()
    records = load_records(kb, slide_files=False)
    if font is None and any(r.language == "ja" for r in records):
        print("no font with Japanese glyphs: pip install 'kotae[slides]' (matplotlib-fontja)", file=sys.stderr)
        return 1
    for record in records:
        draw(record, out / f"{record.id}.png", font)
        print(f"{out / (record.id + '.png')}: {', '.join(f'{f.value} ({f.label})' for f in figures(record)) or '-'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
