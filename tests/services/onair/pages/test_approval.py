"""The approval view in a real Chromium: in hold mode the console shows what the voice will say.

The on-air stage runs in this process against a real nats-server (``onair_stage``)
with its real voice and HTTP server; the browser is Debian's Chromium, started
for this test. The CLI runs as its own process, as the operator would run it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from kotae.contracts import Citation
from tests.factories import CAP_EVIDENCE, verified_answer
from tests.services.onair.conftest import OnAirFactory
from tests.services.onair.pages.conftest import CHROMIUM, CHROMIUM_ARGS, browser_missing

pytestmark = pytest.mark.timeout(180)

TOKEN = "approval-view-token-0123456789"
SAID = "0〜2歳児の保育料は月額1万5千円が上限です[1]。第2子以降は無料です[1]。"


def kotae_cli(*args: str, nats_url: str, data_dir: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KOTAE_NATS_URL": nats_url, "KOTAE_DATA_DIR": data_dir, "KOTAE_STREAM_ID": "stream-1"}
    return subprocess.run(
        [sys.executable, "-m", "kotae", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


async def test_the_hold_queue_shows_the_words_as_spoken_and_an_unknown_id_is_refused(
    onair_stage: OnAirFactory, nats_url: str, tmp_path: Any
) -> None:
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from playwright.async_api import async_playwright

    harness = await onair_stage(onair_show="approval", onair_console_token=SecretStr(TOKEN))
    await harness.command("hold", "on")
    answer = verified_answer("held", "保育料はいくら？", SAID, author="しおみママ", received_at=datetime.now(UTC))
    two = [*answer.citations, Citation(n=2, doc_id=CAP_EVIDENCE.doc_id, slide=4)]
    await harness.answer(answer.model_copy(update={"citations": two}))
    url = await harness.http()

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1600, "height": 1000})
            await page.goto(f"{url}/console")
            row = page.locator("[data-testid=queue-item][data-comment-id=held]")
            await row.wait_for(timeout=30_000)
            speech = await row.locator("[data-testid=queue-speech]").text_content() or ""
            assert "[1]" not in speech and "[" not in speech  # what the voice says, not the display text
            assert speech.startswith("says: ") and "保育料" in speech and "上限" in speech
            assert "waiting for approval" in (await row.text_content() or "")
            cites = await row.locator("[data-testid=queue-cites]").text_content() or ""
            assert f"[1] {CAP_EVIDENCE.title} (slide 4)" in cites and "slide 4" in cites
            assert cites.count(CAP_EVIDENCE.title) == 1  # one document, cited twice, listed once
            verdict = await row.locator("[data-testid=queue-verdict]").text_content()
            assert verdict == "supported: the check found nothing against the documents"
            assert (await row.locator("[data-testid=queue-why]").text_content() or "").startswith("first: a viewer")

            # An id that is not queued: refused, and the console says why.
            await page.fill("[data-testid=token]", TOKEN)
            await page.press("[data-testid=token]", "Enter")
            reply = await page.evaluate(
                """async (token) => {
                  const r = await fetch('/console/command', {method: 'POST', headers: {'Content-Type': 'application/json',
                    Authorization: 'Bearer ' + token}, body: JSON.stringify({command: 'approve', target: 'nope'})});
                  return {status: r.status, body: await r.json()};
                }""",
                TOKEN,
            )
            assert reply["status"] == 400 and "no answer to comment 'nope' is queued" in reply["body"]["error"]
        finally:
            await browser.close()

    # The CLI refuses it too, with the queue named and a non-zero exit; a queued id is sent.
    refused = await asyncio.to_thread(kotae_cli, "onair", "approve", "nope", nats_url=nats_url, data_dir=str(tmp_path))
    assert refused.returncode != 0
    assert "no answer to comment 'nope' is queued on stream 'stream-1' (queued: held)" in refused.stderr
    status = await asyncio.to_thread(kotae_cli, "onair", "status", nats_url=nats_url, data_dir=str(tmp_path))
    assert status.returncode == 0 and "show     approval" in status.stdout
    says = next(line for line in status.stdout.splitlines() if line.strip().startswith("says"))
    assert "[1]" not in says and "上限" in says
    sent = await asyncio.to_thread(kotae_cli, "onair", "approve", "held", nats_url=nats_url, data_dir=str(tmp_path))
    assert sent.returncode == 0, sent.stderr
    finals = await harness.finals("held", timeout=30)
    assert finals["held"].event == "finished" and finals["held"].speech and "[1]" not in finals["held"].speech
