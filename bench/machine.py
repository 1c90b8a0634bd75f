"""The machine a benchmark ran on, for the header of its table."""

from __future__ import annotations

import os
import platform
import subprocess


def describe() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            kb = int(fh.readline().split()[1])
            mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=os.path.dirname(__file__)
        ).stdout.strip()
    except OSError:
        commit = "?"
    return (
        f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, {platform.system()} — commit {commit}"
    )
