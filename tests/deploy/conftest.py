"""Fixtures of the deployment tests: Prometheus's own tools, when this machine has them."""

from __future__ import annotations

import shutil

import pytest

INSTALL = (
    "install Debian's prometheus package (apt-get install prometheus); scripts/test.sh does it when it runs as root"
)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not on PATH: {INSTALL}")
    return path


@pytest.fixture(scope="session")
def promtool() -> str:
    """Path of ``promtool``; the test skips, saying how to get it, when there is none."""
    return _tool("promtool")


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    """Path of the ``prometheus`` server binary; the test skips, saying how to get it, when there is none."""
    return _tool("prometheus")
