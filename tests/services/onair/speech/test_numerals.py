"""English number words: cardinals, ordinals, years and decimals as a speaker says them."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech.numerals import english_decimal, english_number, english_ordinal, english_year


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (13, "thirteen"),
        (40, "forty"),
        (99, "ninety-nine"),
        (150, "one hundred fifty"),
        (1_001, "one thousand one"),
        (15_000, "fifteen thousand"),
        (128_000, "one hundred twenty-eight thousand"),
        (1_200_000, "one million two hundred thousand"),
        (8_600_000_000, "eight billion six hundred million"),
        (-3, "minus three"),
    ],
)
def test_cardinals(n: int, words: str) -> None:
    assert english_number(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [(1, "first"), (2, "second"), (3, "third"), (5, "fifth"), (12, "twelfth"), (20, "twentieth"),
     (21, "twenty-first"), (24, "twenty-fourth"), (31, "thirty-first"), (100, "one hundredth")],
)  # fmt: skip
def test_ordinals(n: int, words: str) -> None:
    assert english_ordinal(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [(1952, "nineteen fifty-two"), (2000, "two thousand"), (2007, "two thousand seven"),
     (2010, "twenty ten"), (2027, "twenty twenty-seven"), (1905, "nineteen oh five"), (1900, "nineteen hundred")],
)  # fmt: skip
def test_years(n: int, words: str) -> None:
    assert english_year(n) == words


def test_decimals_say_each_digit_after_the_point() -> None:
    assert english_decimal("3.25") == "three point two five"
    assert english_decimal("0.5") == "zero point five"
    assert english_decimal("12") == "twelve"
