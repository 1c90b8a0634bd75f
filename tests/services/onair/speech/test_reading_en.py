"""English: every figure, date, time, amount, unit and acronym as words the voice says."""

from __future__ import annotations

import re

import pytest

from kotae.services.onair.speech.reading_en import read_english


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a flat 150 yen", "a flat one hundred fifty yen"),
        ("capped at 15,000 yen a month", "capped at fifteen thousand yen a month"),
        ("costs ¥1,200", "costs one thousand two hundred yen"),
        ("a $1 fee and a $2.50 fee", "a one dollar fee and a two point five zero dollars fee"),
        ("in October 2027", "in October twenty twenty-seven"),
        ("on 2027-01-24", "on January twenty-fourth, twenty twenty-seven"),
        ("on January 24, 2027", "on January twenty-fourth, twenty twenty-seven"),
        ("Sunday, 25 April 2027", "Sunday, the twenty-fifth of April, twenty twenty-seven"),
        ("from 19 to 24 April", "from the nineteenth to the twenty-fourth of April"),
        ("by fiscal 2029", "by fiscal twenty twenty-nine"),
        ("founded in 1952", "founded in nineteen fifty-two"),
        ("open 7:00 a.m. to 8:00 p.m.", "open seven A M to eight P M."),
        ("from 10:00 to 17:30", "from ten o'clock to five thirty P M"),
        ("at 12:00", "at noon"),
        ("children aged 0 to 2", "children aged zero to two"),
        ("ages 3-5", "ages three to five"),
        ("The Sorabo R7 (model SRB-R7)", "The Sorabo R seven (model S R B R seven)"),
        ("only for PS5 and a 3D sensor", "only for P S five and a three D sensor"),
        ("the COVID-19 rules, a 20MW plant", "the COVID nineteen rules, a twenty megawatts plant"),
        ("less than 5 m above sea level", "less than five meters above sea level"),
        ("a 3.5 km walk", "a three point five kilometer walk".replace("kilometer", "kilometers")),
        ("1 km away", "one kilometer away"),
        ("above 28℃", "above twenty-eight degrees Celsius"),
        ("30% less", "thirty percent less"),
        ("the 1st floor", "the first floor"),
        ("NHK and SNS", "N H K and S N S"),
        ("show your ID", "show your I D"),
        ("NASA and UNESCO", "NASA and UNESCO"),
    ],
)
def test_figures_and_acronyms_are_said_as_words(text: str, said: str) -> None:
    assert read_english(text) == said


def test_japanese_script_in_an_english_answer_is_said_in_romaji() -> None:
    assert read_english("The 汐見線 line opens in October.") == "The Shiomisen line opens in October."


def test_no_digit_is_left_for_the_voice_to_guess() -> None:
    text = "Polls open 7:00-20:00 on 2027-01-24; 840 places, 3.5 km, 25℃, 30%, ¥150, the 2nd child."
    assert not re.search(r"\d", read_english(text))
