"""The overlay and the console in a real Chromium, with the whole stack running.

One stack and one browser for the module (they take ~20 s to start); the tests
run in order, each asking its own question in the stack's chat. What a viewer
and the operator would notice is checked on the pages themselves: what the
overlay shows and plays, what the console's buttons do, and that neither page
logs an error or asks any other host for anything.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

#: Sample questions the offline pipeline answers from the sample knowledge base (one topic each).
QUESTIONS = {
    "p-fee": ("保育料っていくらになるの", "しおみママ"),
    "p-bus": ("バスの運賃はいくらになりますか？", "港北の学生"),
    "p-shelter": ("避難所は何か所になるの？", "防災係"),
    "p-hold": ("給食費は無料になりますか？", "三児の父"),
    "p-tower": ("津波避難タワーは何基つくるの？", "海辺の住人"),
    "p-rent": ("若者の家賃補助はいくらもらえますか？", "一人暮らし"),
}

WATCH_OVERLAY = """() => {
  const w = window.__kotae = {subtitles: [], shownAt: [], ended: [], played: []};
  const voice = document.getElementById('voice');
  const clip = () => (window.kotaeOverlay.clip() || {}).n || null;
  voice.addEventListener('ended', () => w.ended.push({src: voice.currentSrc, n: clip(), at: voice.currentTime,
    duration: voice.duration, t: performance.now()}));
  voice.addEventListener('playing', () => w.played.push({src: voice.currentSrc, n: clip(), t: performance.now()}));
  w.changes = [];
  new MutationObserver(() => w.changes.push({id: document.getElementById('stage').dataset.commentId || null, at: Date.now()}))
    .observe(document.getElementById('stage'), {attributes: true, attributeFilter: ['data-comment-id']});
  new MutationObserver(() => {
    const text = document.querySelector('[data-testid=answer]').textContent;
    if (text && w.subtitles[w.subtitles.length - 1] !== text) { w.subtitles.push(text); w.shownAt.push(voice.currentTime); }
  }).observe(document.querySelector('[data-testid=answer]'), {childList: true, subtree: true, characterData: true});
}"""


async def on_air_id(page: Any) -> str | None:
    return await page.evaluate("() => document.getElementById('stage').dataset.commentId || null")


async def wait_on_air(page: Any, comment_id: str, timeout_ms: float = 60_000) -> None:
    await page.wait_for_function(
        "(id) => document.getElementById('stage').dataset.commentId === id", arg=comment_id, timeout=timeout_ms
    )


async def audio_ended(page: Any, timeout_ms: float = 60_000) -> None:
    """Wait for the overlay's audio element to play to its end (and say what it did when it does not)."""
    try:
        await page.wait_for_function("() => window.__kotae.ended.length > 0", timeout=timeout_ms)
    except Exception as exc:
        seen = await page.evaluate(
            "() => ({watched: window.__kotae, paused: voice.paused, t: voice.currentTime, src: voice.currentSrc,"
            " error: voice.error && voice.error.message, state: window.kotaeOverlay.current()})"
        )
        raise AssertionError(f"the audio did not play to its end: {seen}") from exc


async def set_token(page: Any, token: str) -> None:
    await page.fill("[data-testid=token]", token)
    await page.press("[data-testid=token]", "Enter")


async def console_state(stack: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"{stack.url}/console/state") as reply:
        return await reply.json()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pages(stack_on_air: Any, open_page: Any) -> dict[str, Any]:
    overlay, overlay_seen = await open_page(f"{stack_on_air.url}/overlay")
    await overlay.evaluate(WATCH_OVERLAY)
    console, console_seen = await open_page(f"{stack_on_air.url}/console")
    await console.set_viewport_size({"width": 1600, "height": 1000})
    await set_token(console, stack_on_air.token)
    return {"overlay": overlay, "console": console, "seen": [overlay_seen, console_seen]}


async def test_an_aired_answer_shows_its_question_subtitles_and_slide_and_its_audio_plays_to_the_end(
    stack_on_air: Any, pages: dict[str, Any], screenshots: Path
) -> None:
    overlay = pages["overlay"]
    text, author = QUESTIONS["p-fee"]
    await stack_on_air.ask(("p-fee", text, author))
    await wait_on_air(overlay, "p-fee")
    assert await overlay.text_content("[data-testid=question]") == text
    assert await overlay.text_content("[data-testid=asker]") == author
    slide = overlay.locator("[data-testid=slide]")
    await overlay.wait_for_function(
        "() => { const i = document.querySelector('[data-testid=slide]'); return i.complete && i.naturalWidth > 0; }"
    )
    box = await slide.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 50
    assert "/slides/default/childcare-2027" in (await slide.get_attribute("src") or "")
    air = await overlay.evaluate("() => window.kotaeOverlay.current()")
    # The voice starts on the first sentence (here the question, read first) while the rest is made.
    assert air["sentences"][0]["n"] == 1 and air["cues"][0]["part"] == "question", air
    await overlay.wait_for_timeout(1200)
    await overlay.screenshot(path=str(screenshots / "overlay.png"), omit_background=True)  # as OBS composites it
    await overlay.wait_for_function(
        "() => { const a = window.kotaeOverlay.current(); return a && a.sentences.length === a.sentences[0].of; }",
        timeout=30_000,
    )
    air = await overlay.evaluate("() => window.kotaeOverlay.current()")
    clips = air["sentences"]
    answer_cues = [c for c in air["cues"] if c["part"] == "answer"]
    cues = [c["text"] for c in answer_cues]
    assert len(clips) >= 2 and cues, air  # the question, then each sentence of the answer
    await overlay.wait_for_function(
        "(n) => window.__kotae.ended.length >= n", arg=len(clips), timeout=60_000, polling=100
    )
    watched = await overlay.evaluate("() => window.__kotae")
    # Every sentence's own clip was fetched and played to its end, once each, in order.
    requests = [u for u in pages["seen"][0].requests if "/audio/" in u]
    assert [next(i for i, u in enumerate(requests) if u.endswith(c["audio_url"])) for c in clips] == sorted(
        next(i for i, u in enumerate(requests) if u.endswith(c["audio_url"])) for c in clips
    ), requests
    assert [e["n"] for e in watched["ended"]] == [c["n"] for c in clips], watched["ended"]
    for ended, clip in zip(watched["ended"], clips, strict=True):
        assert ended["at"] == pytest.approx(ended["duration"], abs=0.05), ended
        assert ended["duration"] * 1000 == pytest.approx(clip["audio_ms"], abs=60), (ended, clip)
    # Back to back: each clip due right after the one before started as that one ended. The audio element loads the
    # next clip's blob when it is given it (20-150 ms on a quiet machine), inside the pause each clip already ends
    # with; measured against the clip itself, not the clock, so a busy machine does not fail it: the switch stays
    # under a fifth of the sentence before it (a pause a listener would take for the end of the answer is longer).
    plays = {p["n"]: p["t"] for p in watched["played"]}
    for before, after in zip(clips, clips[1:], strict=False):
        if after["offset_ms"] == before["offset_ms"] + before["audio_ms"]:
            end = next(e["t"] for e in watched["ended"] if e["n"] == before["n"])
            assert plays[after["n"]] - end < 0.2 * before["audio_ms"], (before, after, watched)
    shown = watched["subtitles"]
    visible = [s.replace(" ", "") for s in shown]
    # Each sentence came on screen, in order, while its clip played ...
    assert [c for c in cues if any(c.replace("[", "").replace("]", "")[:6] in v for v in visible)] == cues, shown
    # ... and not before its words are said: the first answer cue waited for the question's clip to end.
    first = visible.index(next(v for v in visible if cues[0].replace("[", "").replace("]", "")[:6] in v))
    assert watched["shownAt"][first] >= 0 and watched["ended"][0]["n"] == 1
    assert answer_cues[0]["start_ms"] >= clips[0]["audio_ms"]
    await overlay.wait_for_function("() => !window.kotaeOverlay.current()", timeout=10_000)
    events = await stack_on_air.events("p-fee")
    steps = [e["event"] for e in events]
    assert steps[-1] == "finished" and steps.count("sentence") == len(clips) - 1, steps
    assert steps.index("started") < steps.index("sentence")
    finished = events[-1]
    assert finished["audio_ms"] == pytest.approx(sum(c["audio_ms"] for c in clips), abs=len(clips))


async def test_a_reload_mid_answer_resumes_the_same_answer_where_the_server_is(
    stack_on_air: Any, pages: dict[str, Any]
) -> None:
    overlay = pages["overlay"]
    text, author = QUESTIONS["p-bus"]
    await stack_on_air.ask(("p-bus", text, author))
    await wait_on_air(overlay, "p-bus")
    await overlay.wait_for_timeout(1500)
    before = await overlay.evaluate("() => window.kotaeOverlay.current()")
    await overlay.reload()
    await wait_on_air(overlay, "p-bus", timeout_ms=5000)
    await overlay.evaluate(WATCH_OVERLAY)
    after = await overlay.evaluate("() => window.kotaeOverlay.current()")
    assert after["key"] == before["key"]  # the same answer, the same airing
    await overlay.wait_for_function("() => !document.getElementById('voice').paused", timeout=5000)
    # Where in the answer: the clip's place in the airing plus the position in that clip.
    position = await overlay.evaluate(
        "() => window.kotaeOverlay.clip().offset_ms / 1000 + document.getElementById('voice').currentTime"
    )
    elapsed = (time.time() * 1000 - _epoch_ms(after["started_at"])) / 1000
    assert position > 1.0 and position == pytest.approx(elapsed, abs=1.0)  # not from the start: where the server is
    await audio_ended(overlay)


async def test_skip_in_the_console_moves_the_overlay_on_within_a_second(
    stack_on_air: Any, pages: dict[str, Any]
) -> None:
    overlay, console = pages["overlay"], pages["console"]
    text, author = QUESTIONS["p-shelter"]
    await stack_on_air.ask(("p-shelter", text, author))
    await wait_on_air(overlay, "p-shelter")
    await console.wait_for_function(
        "() => (document.querySelector('[data-testid=on-air]').textContent || '').includes('p-shelter')"
    )
    clicked = time.time()
    await console.click("[data-testid=skip]")
    await overlay.wait_for_function(
        "() => document.getElementById('stage').dataset.commentId !== 'p-shelter'", timeout=5000, polling=50
    )
    # When the overlay's page changed, by its own clock (the same machine's): not when this test noticed.
    changes = await overlay.evaluate("() => window.__kotae.changes")
    moved_at = next(c["at"] / 1000 for c in changes if c["at"] / 1000 >= clicked and c["id"] != "p-shelter")
    moved_on = moved_at - clicked
    assert moved_on < 1.0, f"the overlay moved on {moved_on:.2f} s after the click"
    assert await overlay.evaluate("() => document.getElementById('voice').paused")
    final = [e for e in await stack_on_air.events("p-shelter") if e["event"] == "skipped"]
    assert final and final[0]["by"] == "onair" and "skipped by onair" in final[0]["reason"]


async def test_in_hold_mode_nothing_airs_until_the_operator_approves_it(
    stack_on_air: Any, pages: dict[str, Any], screenshots: Path
) -> None:
    overlay, console = pages["overlay"], pages["console"]
    await console.click("[data-testid=hold]")
    await console.wait_for_function("() => document.querySelector('[data-testid=mode]').textContent.includes('hold')")
    text, author = QUESTIONS["p-hold"]
    # The same question from a second viewer, and another question: both wait with it.
    await stack_on_air.ask(("p-hold", text, author), ("p-hold-too", text, "給食係"), ("p-rent", *QUESTIONS["p-rent"]))
    row = console.locator("[data-testid=queue-item][data-comment-id=p-hold]")
    await row.wait_for(timeout=60_000)
    await console.locator("[data-testid=queue-item][data-comment-id=p-rent]").wait_for(timeout=60_000)
    await console.wait_for_function(
        "() => document.querySelector('[data-testid=queue-item][data-comment-id=p-hold]').children[4].textContent === '2'"
    )  # the merged duplicate is credited to the question it repeats
    assert "waiting for approval" in (await row.text_content() or "")
    await console.screenshot(path=str(screenshots / "console.png"), full_page=True)
    await overlay.wait_for_timeout(3000)  # verified and queued, and still nothing airs
    assert await on_air_id(overlay) is None
    assert [e["event"] for e in await stack_on_air.events("p-hold")] == ["queued"]
    await row.locator("[data-testid=approve]").click()
    await wait_on_air(overlay, "p-hold", timeout_ms=15_000)
    assert await overlay.text_content("[data-testid=credit]") == "ほか1人から同じ質問"
    assert await on_air_id(overlay) == "p-hold"  # p-rent, not approved, still waits
    await console.click("[data-testid=hold]")
    await console.wait_for_function("() => !document.querySelector('[data-testid=mode]').textContent.includes('hold')")
    started = [e for e in await stack_on_air.events("p-hold") if e["event"] == "started"]
    assert started and started[0]["attempt"] == 1


async def test_a_console_action_without_the_token_is_refused_and_changes_nothing(
    stack_on_air: Any, open_page: Any
) -> None:
    page, seen = await open_page(f"{stack_on_air.url}/console")  # a tab that never got the token
    await page.wait_for_selector("[data-testid=pause]")
    await page.click("[data-testid=pause]")
    await page.wait_for_function(
        "() => document.querySelector('[data-testid=console-message]').textContent.includes('401')"
    )
    async with aiohttp.ClientSession() as http:
        for headers in ({}, {"Authorization": "Bearer not-the-token-at-all"}, {"Authorization": stack_on_air.token}):
            body = json.dumps({"command": "end"})
            async with http.post(f"{stack_on_air.url}/console/command", data=body, headers=headers) as reply:
                assert reply.status == 401, headers
        async with http.post(
            f"{stack_on_air.url}/console/command?token={stack_on_air.token}", data=json.dumps({"command": "end"})
        ) as reply:
            assert reply.status == 401  # a token in the URL is no token
    await asyncio.sleep(1.0)
    mode = (await console_state(stack_on_air))["status"]["mode"]
    assert mode == {"paused": False, "hold": False, "ended": False}
    assert all("401" in error for error in seen.errors), seen.errors  # the refusal, and nothing else
    await page.close()


async def test_the_pages_logged_no_error_and_asked_no_other_host(
    stack_on_air: Any, pages: dict[str, Any], open_page: Any
) -> None:
    subtitles_only, seen_alone = await open_page(f"{stack_on_air.url}/overlay?layout=subtitles")
    text, author = QUESTIONS["p-tower"]
    await stack_on_air.ask(("p-tower", text, author))
    await wait_on_air(pages["overlay"], "p-tower")
    await wait_on_air(subtitles_only, "p-tower", timeout_ms=5000)
    await subtitles_only.wait_for_function("() => document.querySelector('[data-testid=answer]').textContent")
    assert await subtitles_only.is_visible("[data-testid=answer]")
    assert not await subtitles_only.is_visible("[data-testid=question]")
    assert not await subtitles_only.is_visible("[data-testid=slide]")
    await subtitles_only.close()
    for seen in [*pages["seen"], seen_alone]:
        assert seen.errors == []
        assert seen.requests and all(stack_on_air.is_this_server(url) for url in seen.requests), seen.requests


def _epoch_ms(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp() * 1000
