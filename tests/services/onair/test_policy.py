"""kotae.services.onair.policy: one test per rule of the airtime policy (the stage README's table)."""

from __future__ import annotations

from datetime import timedelta

from kotae.contracts import Asker
from kotae.language.text import search_tokens
from kotae.services.onair.policy import Aired, Entry, Policy, choose, cooling, expired, ranked, repeat_of, to_shed
from kotae.services.onair.state import spoken_form
from tests.factories import ONAIR_AT, verified_answer

POLICY = Policy(
    max_age_s=120, cooldown_s=60, max_queue=3, repeat_s=600, repeat_similarity=0.6, rates={"JPY": 1, "USD": 150}
)


def entry(
    cid: str, question: str = "保育料っていくらになるの", *, seq: int = 1, age_s: float = 0, **kw: object
) -> Entry:
    answer = verified_answer(cid, question, received_at=ONAIR_AT - timedelta(seconds=age_s), **kw)  # type: ignore[arg-type]
    return Entry(answer, seq, frozenset(search_tokens(question)), spoken_form(answer))


def test_super_chats_go_first_by_their_amount_in_yen_then_members_then_everyone() -> None:
    everyone = entry("e", seq=1, age_s=50)
    member = entry("m", seq=2, member=True)
    small = entry("s", seq=3, superchat=(1000, "JPY"))
    big = entry("b", seq=4, superchat=(10, "USD"))  # 1,500 yen
    points = entry("p", seq=5, superchat=(500, "XXX"))  # no rate: still a Super Chat, ranked last among them
    assert [e.comment_id for e in ranked([everyone, member, small, big, points], POLICY)] == ["b", "s", "p", "m", "e"]


def test_a_question_more_viewers_asked_goes_before_one_that_waited_longer() -> None:
    lonely = entry("lonely", seq=1, age_s=30)
    popular = entry("popular", seq=2)
    popular.askers = [Asker(comment_id=f"dup{i}", author=f"v{i}") for i in range(3)]
    assert [e.comment_id for e in ranked([lonely, popular], POLICY)] == ["popular", "lonely"]


def test_among_equals_the_one_waiting_longest_goes_first() -> None:
    newer, older = entry("newer", seq=2, age_s=5), entry("older", seq=1, age_s=40)
    assert [e.comment_id for e in ranked([newer, older], POLICY)] == ["older", "newer"]


def test_an_answer_older_than_the_max_age_when_its_turn_comes_is_expired_not_aired() -> None:
    old, fresh = entry("old", "保育料は？", age_s=121), entry("fresh", "バス代は？", age_s=119)
    assert expired(old, ONAIR_AT, POLICY) and "older than 120 s" in expired(old, ONAIR_AT, POLICY)
    choice = choose([old, fresh], [], {}, ONAIR_AT, POLICY)
    assert choice.entry is fresh
    assert [e.comment_id for e, _ in choice.expired] == ["old"]


def test_a_question_near_identical_to_one_aired_recently_is_not_aired_again() -> None:
    aired = [
        Aired("first", "a", frozenset(search_tokens("保育料はいくらになるの")), "", ONAIR_AT - timedelta(seconds=90))
    ]
    again = entry("again", "保育料っていくらになるの", answer="別の言い方の答えです[1]。")
    found = repeat_of(again, aired, ONAIR_AT, POLICY)
    assert found is not None and found[0].comment_id == "first" and "near-identical" in found[1]
    choice = choose([again], aired, {}, ONAIR_AT, POLICY)
    assert choice.entry is None and [(e.comment_id, past.comment_id) for e, past, _ in choice.repeats] == [
        ("again", "first")
    ]


def test_the_same_spoken_answer_counts_as_a_repeat_whatever_the_question() -> None:
    first = entry("first", "保育料は？")
    other = entry("other", "子どもを預けるといくら？")  # other words, the same reply
    aired = [Aired("first", "a", first.tokens, first.spoken, ONAIR_AT - timedelta(seconds=30))]
    found = repeat_of(other, aired, ONAIR_AT, POLICY)
    assert found is not None and found[1] == "the same answer"


def test_a_repeat_outside_the_window_airs_again() -> None:
    again = entry("again", "保育料っていくらになるの")
    aired = [Aired("first", "a", again.tokens, again.spoken, ONAIR_AT - timedelta(seconds=601))]
    assert repeat_of(again, aired, ONAIR_AT, POLICY) is None
    assert choose([again], aired, {}, ONAIR_AT, POLICY).entry is again


def test_a_viewer_answered_recently_waits_behind_the_others_unless_it_is_a_super_chat() -> None:
    recent = {"regular": ONAIR_AT - timedelta(seconds=30)}
    again = entry("again", "バス代は？", author="regular", seq=1, age_s=60)
    other = entry("other", "給食費は？", author="newcomer", seq=2)
    assert cooling(again, recent, ONAIR_AT, POLICY)
    assert choose([again, other], [], recent, ONAIR_AT, POLICY).entry is other
    paid = entry("paid", "バス代は？", author="regular", seq=3, superchat=(500, "JPY"))
    assert not cooling(paid, recent, ONAIR_AT, POLICY)
    assert choose([paid, other], [], recent, ONAIR_AT, POLICY).entry is paid


def test_a_cooling_viewer_still_airs_when_nobody_else_is_waiting() -> None:
    recent = {"regular": ONAIR_AT - timedelta(seconds=30)}
    alone = entry("alone", "バス代は？", author="regular")
    assert choose([alone], [], recent, ONAIR_AT, POLICY).entry is alone


def test_a_backlog_above_the_limit_sheds_its_lowest_ranked_entries() -> None:
    entries = [entry(f"q{i}", f"質問{i}は？", seq=i, age_s=10 - i) for i in range(5)]
    entries.append(entry("paid", "質問は？", seq=9, superchat=(500, "JPY")))
    shed = to_shed(entries, POLICY)
    # The Super Chat first, then the three that waited longest; the limit is 3.
    assert [(e.comment_id, rank) for e, rank in shed] == [("q2", 4), ("q3", 5), ("q4", 6)]


def test_in_hold_mode_only_approved_answers_may_air() -> None:
    first, second = entry("first", "保育料は？", seq=1, age_s=20), entry("second", "バス代は？", seq=2)
    assert choose([first, second], [], {}, ONAIR_AT, POLICY, hold=True).entry is None
    second.approved_by = "operator"
    assert choose([first, second], [], {}, ONAIR_AT, POLICY, hold=True).entry is second


def test_what_the_operator_says_to_air_next_goes_first_past_rank_and_cooldown() -> None:
    recent = {"regular": ONAIR_AT - timedelta(seconds=30)}
    paid = entry("paid", "保育料は？", seq=1, superchat=(1000, "JPY"))
    pinned = entry("pinned", "バス代は？", author="regular", seq=2)
    later = entry("later", "給食費は？", seq=3)
    assert choose([paid, pinned, later], [], recent, ONAIR_AT, POLICY).entry is paid
    pinned.next_rank, later.next_rank = 1, 2  # 'later' was said to air next after 'pinned' was
    assert [e.comment_id for e in ranked([paid, pinned, later], POLICY)] == ["later", "pinned", "paid"]
    later.next_rank = 0
    assert choose([paid, pinned, later], [], recent, ONAIR_AT, POLICY).entry is pinned
    assert [e.comment_id for e, _ in to_shed([paid, pinned, later, entry("x", "x", seq=4)], POLICY)] == ["x"]


def test_while_hold_is_on_an_answer_waiting_for_approval_does_not_expire_unless_a_setting_says_so() -> None:
    old = Entry(answer=verified_answer("held"), seq=1, tokens=frozenset({"保育料"}), spoken="x")
    later = old.received_at + timedelta(seconds=600)
    assert expired(old, later, Policy()) is not None  # hold off: the age limit applies
    assert expired(old, later, Policy(), hold=True) is None  # hold on: it waits for the operator
    assert expired(old, later, Policy(hold_max_age_s=300), hold=True) is not None
    assert choose([old], [], {}, later, Policy(), hold=True).expired == []


def test_a_super_chat_repeat_is_thanked_or_aired_again_never_only_already_aired() -> None:
    from kotae.services.onair.policy import thanked_instead

    paid = Entry(
        answer=verified_answer("paid", superchat=(500, "JPY")), seq=2, tokens=frozenset({"保育料"}), spoken="y"
    )
    past = Aired("first", "a", frozenset({"保育料"}), "z", paid.received_at)
    assert repeat_of(paid, [past], paid.received_at, Policy()) is not None and thanked_instead(paid, Policy())
    assert repeat_of(paid, [past], paid.received_at, Policy(superchat_repeat="again")) is None
