"""Japanese: what Open JTalk would misread, rewritten; and what the voice then reads, checked with Open JTalk."""

from __future__ import annotations

import pytest

from kotae.services.onair.speech.openjtalk import reading
from kotae.services.onair.speech.reading_ja import read_japanese


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("受付は9:00〜17:00です", "受付は9時から17時です"),
        ("受付は9:00-17:00です", "受付は9時から17時です"),
        ("ウルトラワイド（21:9）でも表示", "ウルトラワイド（21対9）でも表示"),  # a ratio, not a time
        ("23:30〜 年越し配信", "23時30分から年越し配信"),
        ("投票日は2027/4/25です", "投票日は2027年4月25日です"),
        ("締切は2027-01-31", "締切は2027年1月31日"),
        ("1/24(日)に投票", "1月24日日曜日に投票"),
        ("2027年4月25日（日）です", "2027年4月25日日曜日です"),
        ("土日（祝）は休み", "土日祝日は休み"),
        ("0〜2歳児", "0から2歳児"),
        ("送料は¥660", "送料は660円"),
        ("$5の寄付", "5ドルの寄付"),
        ("R7年度の予算", "令和7年度の予算"),
        ("あけぼの町3-14", "あけぼの町3の14"),
        ("各50g", "各50グラム"),
        ("身長148cm", "身長148センチメートル"),
        ("面積120m²の", "面積120平方メートルの"),
        ("28℃以上", "28度以上"),
        ("60%から75%に", "60パーセントから75パーセントに"),
        ("10名/B賞", "10名、ビー賞"),
        ("324円:北海道産", "324円、北海道産"),
    ],
)
def test_what_open_jtalk_misreads_is_rewritten(text: str, said: str) -> None:
    assert read_japanese(text) == said


def test_a_fraction_like_pair_that_is_no_date_is_left_alone() -> None:
    assert read_japanese("13/40の票") == "13/40の票"


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("受付は9:00〜17:00です", "クジカラジュー"),
        ("1/24(日)に投票", "イチガツニジューヨッカニチヨービ"),
        ("R7年度のDX予算", "ワナナネンドノディーエックスヨサン"),
        ("送料は¥660", "ロッピャクロクジューエン"),
        ("公式VTuberがYouTubeで", "ブイチューバー"),
        ("Minato Loopの運賃", "ミナトループ"),
    ],
)
def test_open_jtalk_reads_the_rewritten_text_as_a_person_would(text: str, kana: str) -> None:
    assert kana in reading(read_japanese(text)).replace("、", "")


def test_without_the_rewriting_open_jtalk_would_have_misread_them() -> None:
    """The cases above are not ones the voice already reads right (else the rules would be noise)."""
    assert "クジカラ" not in reading("受付は9:00〜17:00です")
    assert "ディーエックス" not in reading("DX予算")
    assert "ミナト" not in reading("Minato Loop")
