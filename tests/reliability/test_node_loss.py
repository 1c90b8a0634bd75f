"""A NATS node lost mid-replay: with streams replicated three times, nothing is lost and answers keep coming.

Three nats-server processes form a cluster; kotae's streams are declared with
three replicas (``stream_replicas=3``), as in production. The node that leads
the pipeline stream is killed with SIGKILL while comments are in flight, more
comments are replayed while it is down, then it comes back and a last batch
goes through. Stages connect through one node and find the others from the
cluster's gossip (a comma-separated ``KOTAE_NATS_URL`` is not accepted: see the
last test).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import nats.errors
import pytest

from kotae.bus.topology import ensure_streams_at
from kotae.contracts import subjects
from kotae.replay import run_replay
from kotae.settings import Settings
from tests.fakes.cluster import NatsCluster
from tests.integration.stages import running_stages
from tests.reliability.harness import generated_comments, read_ledger, wait_until_settled

pytestmark = pytest.mark.slow

HOT_PATH = ("retriever", "reranker", "generator", "verifier")


async def declare_when_ready(url: str, settings: Settings, timeout: float = 30.0) -> None:
    """Declare the replicated streams once the cluster has elected its JetStream leader."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await ensure_streams_at(url, settings)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def stream_state(url: str, stream: str) -> tuple[str | None, int, list[bool]]:
    """Leader, replicas configured, and whether each follower is current."""
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().stream_info(stream)
        peers = [bool(r.current) for r in (info.cluster.replicas or [])] if info.cluster else []
        return (info.cluster.leader if info.cluster else None), info.config.num_replicas, peers
    finally:
        await nc.close()


async def until_current(url: str, stream: str, timeout: float = 30.0) -> tuple[str | None, int, list[bool]]:
    deadline = time.monotonic() + timeout
    while True:
        state = await stream_state(url, stream)
        if (len(state[2]) == 2 and all(state[2])) or time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.5)


@pytest.fixture
def replicated(chaos_loaded: Settings) -> Settings:
    return chaos_loaded.model_copy(update={"stream_replicas": 3, "ack_wait_s": 5.0})


async def test_losing_the_node_that_leads_the_pipeline_stream_loses_nothing(
    tmp_path: Path, replicated: Settings
) -> None:
    with NatsCluster(tmp_path / "cluster") as cluster:
        seed = cluster.nodes[0]
        settings = replicated.model_copy(update={"nats_url": seed.url})
        await declare_when_ready(seed.url, settings)
        leader, replicas, _ = await stream_state(seed.url, subjects.STREAM_PIPELINE)
        assert replicas == 3
        # The stream's leader is the node to lose; the seed stays, so the test process keeps its connection.
        victim = cluster.node_named(leader) if leader and leader != seed.name else cluster.nodes[1]

        before = generated_comments(30, prefix="before-", gap_s=0.05)
        down = generated_comments(15, prefix="down-")
        back = generated_comments(15, prefix="back-")
        async with running_stages(settings, seed.url):
            replay = asyncio.create_task(run_replay(settings, seed.url, before, timeout=90, timing="original"))
            await asyncio.sleep(0.8)  # comments in flight
            assert cluster.kill(victim) == -9
            first = await replay
            while_down = await run_replay(settings, seed.url, down, timeout=90)
            cluster.restart(victim)
            after = await run_replay(settings, seed.url, back, timeout=90)
            assert await wait_until_settled(seed.url, HOT_PATH, timeout=60)
        ledger = await read_ledger(seed.url, [c.id for c in [*before, *down, *back]], faults=1)
        new_leader, _, followers = await until_current(seed.url, subjects.STREAM_PIPELINE)

    figures = ledger.figures()
    print("\n" + figures.table())
    assert first.missing == [] and while_down.missing == [] and after.missing == []
    assert figures.lost == 0, ledger.problems()
    assert figures.duplicates == 0, ledger.problems()
    assert figures.unchecked_verified == 0, ledger.problems()
    assert figures.terminal == len(before) + len(down) + len(back)
    assert figures.outcomes.get("verified", 0) > 0
    # The election is waited out (kotae.bus.outage): no comment ends 'failed' for a bus fault.
    assert figures.outcomes.get("failed", 0) == 0, ledger.problems()
    assert new_leader is not None
    assert followers == [True, True], "the returning node caught up with the replicated stream"


async def test_a_comma_separated_server_list_in_kotae_nats_url_is_accepted(
    tmp_path: Path, replicated: Settings
) -> None:
    with NatsCluster(tmp_path / "cluster") as cluster:
        url = ",".join(cluster.urls)
        settings = replicated.model_copy(update={"nats_url": url})
        await declare_when_ready(cluster.nodes[0].url, settings)
        async with running_stages(settings, url, stages=HOT_PATH):
            result = await run_replay(settings, url, generated_comments(3, prefix="list-"), timeout=60)
    assert result.missing == []
