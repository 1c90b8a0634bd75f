"""The event loop a stage process runs on (KOTAE_EVENT_LOOP)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kotae.runtime import run_loop
from kotae.settings import load_settings


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def test_auto_runs_a_stage_on_uvloop_where_it_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    assert run_loop(loop_module(), load_settings(data_dir=tmp_path)) == "uvloop"


def test_asyncio_opts_out(tmp_path: Path) -> None:
    assert run_loop(loop_module(), load_settings(data_dir=tmp_path, event_loop="asyncio")) == "asyncio"


def test_asking_for_uvloop_without_it_names_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on a machine without it: import fails
    with pytest.raises(RuntimeError, match="KOTAE_EVENT_LOOP=uvloop"):
        run_loop(loop_module(), load_settings(data_dir=tmp_path, event_loop="uvloop"))
    assert run_loop(loop_module(), load_settings(data_dir=tmp_path)) == "asyncio"  # auto falls back


def test_a_stage_process_freezes_what_start_up_built_with_its_model_sdk_loaded(tmp_path: Path) -> None:
    """settle_heap runs once a ``kotae serve`` stage has started: later full collections skip all of it."""
    import subprocess

    probe = (
        "import gc, sys\n"
        "from kotae.runtime import settle_heap\n"
        "from kotae.services.generator import STAGE\n"
        "from kotae.settings import load_settings\n"
        "settings = load_settings(data_dir=sys.argv[1], generator_model='anthropic:claude-x', anthropic_api_key='k')\n"
        "print(settle_heap(STAGE, settings), gc.get_freeze_count(), 'anthropic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.split()
    frozen, count, sdk_loaded = int(out[0]), int(out[1]), out[2]
    assert frozen == count > 10_000  # the SDK alone brings tens of thousands of objects
    assert sdk_loaded == "True"  # loaded before the freeze, not on the first model call
