"""The pages' routes on a real on-air process and bus, over HTTP: what a browser would be sent."""

from __future__ import annotations

import asyncio
import io
import json
import wave
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from kotae.contracts import ControlV1, subjects
from kotae.knowledge.records import load_records
from kotae.knowledge.store import KnowledgeStore
from kotae.services.onair.pages.access import ConsoleAccessError, token_file
from tests.factories import verified_answer
from tests.services.onair.conftest import OnAirFactory

ROOT = Path(__file__).resolve().parents[4]
LONG = "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。第2子以降の保育料は無料にします[1]。"


def now() -> datetime:
    return datetime.now(UTC)


def with_sample_kb(harness_settings: object) -> None:
    """The sample records (with their slide images) in the store the stage reads; no index needed here."""
    KnowledgeStore(harness_settings.kb_dir, "default").load(load_records(ROOT / "kotae" / "samples" / "kb"))  # type: ignore[attr-defined]


async def stored_commands(nc: object) -> list[tuple[str, ControlV1]]:
    js = nc.jetstream()  # type: ignore[attr-defined]
    sub = await js.subscribe(subjects.CONTROL_ALL, ordered_consumer=True)
    found = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except Exception:
                break
            found.append((msg.subject, ControlV1.model_validate_json(msg.data)))
    finally:
        await sub.unsubscribe()
    return found


async def test_an_airing_answer_has_timed_subtitles_and_its_slide_served_from_the_knowledge_base(
    onair_stage: OnAirFactory,
) -> None:
    harness = await onair_stage(run_stage=False)
    with_sample_kb(harness.settings)
    await harness.start_stage()
    url = await harness.http()
    await harness.answer(verified_answer("c-fee", "保育料っていくら？", LONG, author="しおみママ", received_at=now()))
    # The voice starts on the first sentence; the second is announced, with its own clip, once it is made.
    await harness.until(lambda: harness.of("c-fee", "sentence"), what="c-fee's second sentence")
    async with httpx.AsyncClient(base_url=url) as http:
        air = (await http.get("/overlay/state")).json()["on_air"]
        assert air["comment_id"] == "c-fee" and air["asker"] == "しおみママ" and air["question"] == "保育料っていくら？"
        cues = air["cues"]
        assert [c["text"] for c in cues] == [
            "0〜2歳児の保育料は、世帯の所得にかかわらず月額1万5千円を上限にします[1]。",
            "第2子以降の保育料は無料にします[1]。",
        ]
        # Back to back: the second sentence starts where the first one's clip ends.
        assert cues[0]["start_ms"] == 0 and cues[0]["end_ms"] == cues[1]["start_ms"] < cues[1]["end_ms"]
        assert cues[1]["end_ms"] == pytest.approx(air["audio_ms"], abs=20)
        clips = air["sentences"]
        assert [c["n"] for c in clips] == [1, 2] and all(c["of"] == 2 for c in clips)
        for clip, cue in zip(clips, cues, strict=True):
            wav = (await http.get(clip["audio_url"])).content
            with wave.open(io.BytesIO(wav)) as audio:
                assert round(audio.getnframes() * 1000 / audio.getframerate()) == clip["audio_ms"]
            assert cue["end_ms"] - cue["start_ms"] == clip["audio_ms"]
        assert air["slide"] == {
            "url": "/slides/default/childcare-2027",
            "number": 4,
            "doc_id": "childcare-2027",
            "title": "子育て支援：保育料と待機児童ゼロ",
        }
        image = await http.get(air["slide"]["url"])
        assert image.status_code == 200 and image.headers["content-type"] == "image/png"
        assert image.content[:8] == b"\x89PNG\r\n\x1a\n" and len(image.content) > 10_000
        assert (await http.get("/slides/default/no-such-record")).status_code == 404
        assert (await http.get("/slides/..%2F..%2Fetc/passwd")).status_code == 404


async def test_the_pages_say_where_they_may_load_from_and_the_streamer_css_comes_last(
    onair_stage: OnAirFactory, tmp_path: Path
) -> None:
    css = tmp_path / "mine.css"
    css.write_text(":root { --kotae-subtitle-size: 60px; }\n", encoding="utf-8")
    harness = await onair_stage(onair_overlay_css=css)
    url = await harness.http()
    async with httpx.AsyncClient(base_url=url) as http:
        overlay = await http.get("/overlay")
        policy = overlay.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "connect-src 'self'" in policy and "frame-ancestors" not in policy
        html = overlay.text
        assert html.index("/pages/overlay.css") < html.index("/overlay/custom.css")  # the streamer's rules win
        assert "http" not in html.replace("http-equiv", "")  # no CDN, no font from elsewhere
        assert (await http.get("/overlay/custom.css")).text == css.read_text(encoding="utf-8")
        console = await http.get("/console")
        assert "frame-ancestors 'none'" in console.headers["content-security-policy"]
        assert console.headers["x-frame-options"] == "DENY"
        assert (await http.get("/pages/overlay.js")).headers["content-type"].startswith("text/javascript")
        assert (await http.get("/pages/../service.py")).status_code == 404
        async with http.stream("GET", "/overlay/stream", headers={"Last-Event-ID": "12"}) as events:
            lines = []
            async for line in events.aiter_lines():
                lines.append(line)
                if line.startswith("data:"):
                    break
        state = json.loads(lines[-1].removeprefix("data: "))
        assert "event: state" in lines and state["on_air"] is None and "server_time" in state


async def test_console_actions_need_the_token_in_a_header_and_go_over_the_bus_as_the_clis_do(
    onair_stage: OnAirFactory,
) -> None:
    harness = await onair_stage()
    url = await harness.http()
    token = token_file(harness.settings).read_text(encoding="utf-8").strip()
    async with httpx.AsyncClient(base_url=url) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": token}, {"Cookie": f"token={token}"}):
            refused = await http.post("/console/command", json={"command": "pause"}, headers=headers)
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        in_url = await http.post(f"/console/command?token={token}", json={"command": "pause"})
        assert in_url.status_code == 401
        other_site = await http.post(
            "/console/command",
            json={"command": "pause"},
            headers={"Authorization": f"Bearer {token}", "Origin": "http://evil.example"},
        )
        assert other_site.status_code == 403
        assert await stored_commands(harness._nc) == []  # nothing refused reached the bus
        assert (await http.get("/console/state")).json()["status"]["mode"]["paused"] is False
        auth = {"Authorization": f"Bearer {token}"}
        bad = await http.post("/console/command", json={"command": "hold", "target": "maybe"}, headers=auth)
        assert bad.status_code == 400 and "on or off" in bad.json()["error"]
        sent = await http.post("/console/command", json={"command": "pause"}, headers=auth)
        assert sent.status_code == 200 and sent.json()["sent_as"] == "onair"
        for _ in range(50):
            if (await http.get("/console/state")).json()["status"]["mode"]["paused"]:
                break
            await asyncio.sleep(0.1)
        state = (await http.get("/console/state")).json()
        assert state["status"]["mode"]["paused"] is True
        rows = {row["stage"]: row for row in state["health"]["stages"]}
        assert set(rows) == {"retriever", "reranker", "generator", "verifier", "evaluator", "onair"}
        assert rows["retriever"]["pending"] is None  # no retriever consumes here: no lag to show, and none made up
    ((subject, command),) = await stored_commands(harness._nc)
    assert subject == subjects.control("pause", "onair")  # the audit: who sent it, and from where
    assert command.issued_by == "onair" and command.via is not None and command.via.startswith("console 127.0.0.1")


async def test_a_stage_bound_beyond_this_machine_without_a_token_does_not_start(onair_stage: OnAirFactory) -> None:
    harness = await onair_stage(run_stage=False, onair_http_host="0.0.0.0")
    with pytest.raises(ConsoleAccessError, match="KOTAE_ONAIR_CONSOLE_TOKEN"):
        await harness.start_stage()


def test_the_slide_is_the_top1_documents_and_is_found_from_the_citations_alone_after_a_takeover(
    settings: object,
) -> None:
    from kotae.contracts import Citation
    from kotae.services.onair.knowledge import KnowledgeView
    from kotae.services.onair.pages.slides import SlideFinder, top_document
    from tests.factories import CAP_EVIDENCE

    with_sample_kb(settings)
    slides = SlideFinder(KnowledgeView(settings.kb_dir))  # type: ignore[attr-defined]
    bus = CAP_EVIDENCE.model_copy(update={"doc_id": "bus-fare-2027", "slide": 6})
    answer = verified_answer("c1", docs=[CAP_EVIDENCE, bus])
    assert top_document(answer)[0] == "childcare-2027"
    found = slides.for_answer(answer)
    assert found is not None and found.url == "/slides/default/childcare-2027" and found.number == 4
    cited = [Citation(n=1, doc_id="bus-fare-2027", slide=6), Citation(n=2, doc_id="childcare-2027", slide=4)]
    again = slides.for_citations("default", cited, 4)
    assert again is not None and again.doc_id == "childcare-2027"
    assert slides.for_citations("default", [Citation(n=1, doc_id="not-in-the-kb")], 1) is None
    image = slides.image_file("default", "childcare-2027")
    assert image is not None and image[1] == "image/png" and image[0].name == "childcare-2027.png"
