"""How `kotae up` starts its processes (their environment and /metrics ports) and restarts those that exit."""

from __future__ import annotations

import sys

import pytest
from prometheus_client import REGISTRY

from kotae.settings import Settings, load_settings
from kotae.stack import SINGLE_THREADED, STAGES, RestartPolicy, Stack, StackError


def test_stage_processes_get_single_threaded_compute_pools(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in SINGLE_THREADED:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # an operator's explicit choice wins
    env = Stack(settings)._env()
    assert env["OPENBLAS_NUM_THREADS"] == env["RAYON_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["OMP_NUM_THREADS"] == "3"
    assert env["KOTAE_LOG_FORMAT"] == "json"


def test_every_replica_gets_its_own_metrics_port(tmp_path) -> None:  # noqa: ANN001
    stack = Stack(load_settings(data_dir=tmp_path, metrics_port=9100), replicas=2)
    ports = [stack.metrics_port(stage, i) for stage in STAGES for i in range(2)]
    assert len(set(ports)) == len(ports) and min(ports) == 9101  # 9100 is kotae up's own (its restarts)


def test_a_replacement_or_extra_replica_never_shares_a_metrics_port(tmp_path) -> None:  # noqa: ANN001
    stack = Stack(load_settings(data_dir=tmp_path, metrics_port=9100), replicas=2)
    own = {stage: {stack.metrics_port(stage, i) for i in range(2)} for stage in STAGES}
    everyone = set().union(*own.values())
    # A retriever replica died: its replacement takes the freed port, not the generator's.
    assert stack.metrics_port_for("retriever", everyone - {stack.metrics_port("retriever", 1)}) == stack.metrics_port(
        "retriever", 1
    )
    # A third retriever while both run: a port past every stage's, then the next one.
    extra = stack.metrics_port_for("retriever", everyone)
    assert extra not in everyone and extra == max(everyone) + 1
    assert stack.metrics_port_for("retriever", everyone | {extra}) == extra + 1


async def test_on_the_server_of_kotae_nats_url_kotae_up_creates_missing_streams_and_changes_none(
    nats_url: str, settings: Settings
) -> None:
    import nats

    from kotae.bus.topology import differences, ensure_streams_at, stream_config
    from kotae.contracts import subjects

    older = settings.model_copy(update={"nats_url": nats_url, "max_payload_bytes": settings.max_payload_bytes // 2})
    await ensure_streams_at(nats_url, older)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await js.delete_stream(subjects.STREAM_ANSWERS)
    stack = Stack(settings.model_copy(update={"nats_url": nats_url}), stages=())
    try:
        await stack.start(timeout=30)
    finally:
        stack.stop()
    held = {name: (await js.stream_info(name)).config for name in subjects.STREAM_SUBJECTS}
    await nc.close()
    wanted = {name: stream_config(name, settings) for name in subjects.STREAM_SUBJECTS}
    # The missing stream is there, as this version declares it…
    assert differences(wanted[subjects.STREAM_ANSWERS], held[subjects.STREAM_ANSWERS]) == []
    # …and the others are as the operator left them: changing them is `kotae streams`' job.
    assert differences(wanted[subjects.STREAM_PIPELINE], held[subjects.STREAM_PIPELINE]) != []


class CrashingStack(Stack):
    """A stack whose stage processes exit at once with code 3, as a stage that cannot start would."""

    def command(self, stage: str) -> list[str]:
        return [sys.executable, "-c", "raise SystemExit(3)"]


def wait_exited(stack: Stack) -> None:
    for proc in [p for procs in stack.processes.values() for p in procs]:
        proc.wait(10)


def test_an_exited_stage_is_restarted_after_a_delay_that_grows_and_then_the_stack_gives_up(tmp_path) -> None:  # noqa: ANN001
    policy = RestartPolicy(first_delay_s=1.0, max_delay_s=3.0, window_s=60.0, max_exits=3)
    stack = CrashingStack(load_settings(data_dir=tmp_path), stages=("reranker",), restarts=policy)
    before = REGISTRY.get_sample_value("kotae_stage_restarts_total", {"stage": "reranker"}) or 0.0
    stack.spawn("reranker")
    wait_exited(stack)
    t = 1000.0
    assert stack.supervise(now=t) == []  # seen exiting: a restart is due in 1 s
    assert stack.supervise(now=t + 0.5) == []
    assert stack.supervise(now=t + 1.0) == ["reranker"]
    wait_exited(stack)
    assert stack.supervise(now=t + 2.0) == []  # second exit within the window: 2 s this time
    assert stack.supervise(now=t + 3.5) == []
    assert stack.supervise(now=t + 4.0) == ["reranker"]
    wait_exited(stack)
    stack.supervise(now=t + 5.0)  # third exit: 3 s (capped)
    assert stack.supervise(now=t + 8.0) == ["reranker"]
    wait_exited(stack)
    with pytest.raises(StackError, match="stage reranker exited 4 times within 60s"):
        stack.supervise(now=t + 9.0)
    after = REGISTRY.get_sample_value("kotae_stage_restarts_total", {"stage": "reranker"})
    assert after == before + 3
    stack.stop()


def test_exits_that_lie_outside_the_window_are_forgotten(tmp_path) -> None:  # noqa: ANN001
    policy = RestartPolicy(first_delay_s=1.0, max_delay_s=30.0, window_s=10.0, max_exits=1)
    stack = CrashingStack(load_settings(data_dir=tmp_path), stages=("generator",), restarts=policy)
    stack.spawn("generator")
    for t in (0.0, 100.0, 200.0):  # one exit per window: restarted every time, first delay every time
        wait_exited(stack)
        assert stack.supervise(now=t) == []
        assert stack.supervise(now=t + 1.0) == ["generator"]
    stack.stop()
