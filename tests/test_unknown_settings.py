"""kotae.unknown_settings: a KOTAE_* variable no setting reads is named, with the closest one that exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from kotae.unknown_settings import known_variables, unknown_setting_warnings, unknown_variables

ROOT = Path(__file__).resolve().parents[1]


def test_a_typo_is_reported_with_the_setting_it_most_likely_meant() -> None:
    assert unknown_variables(["KOTAE_TOPN", "KOTAE_NATS_URLS", "kotae_log_levl"]) == [
        ("KOTAE_NATS_URLS", "KOTAE_NATS_URL"),
        ("KOTAE_TOPN", "KOTAE_TOP_N"),
        ("kotae_log_levl", "KOTAE_LOG_LEVEL"),
    ]


def test_a_name_like_no_setting_points_to_the_settings_table_not_to_a_random_one() -> None:
    (line,) = unknown_setting_warnings({"KOTAE_ZZQQXX": "1"})
    assert "KOTAE_ZZQQXX is not a kotae setting" in line and "README.md" in line and "did you mean" not in line


def test_settings_and_other_programs_variables_are_left_alone() -> None:
    environ = {"KOTAE_DATA_DIR": ".kotae", "KOTAE_NATS_URL": "nats://x", "PATH": "/bin", "KOTAEX": "1"}
    environ |= {"KOTAE_TEST_NATS_URL": "nats://y", "KOTAE_REAL_MODEL_CTX": "4096", "KOTAE_VENV": "/tmp/v"}
    assert unknown_setting_warnings(environ) == []


#: A dollar sign (and brace) before the name in shell and compose files; ``environ``, ``environ.get``,
#: ``getenv`` or ``setdefault`` with the quoted name in Python.
_READS = re.compile(
    r"""\$\{?(KOTAE_[A-Z0-9_]+)|(?:environ(?:\.get)?\(?\[?|getenv\(|setdefault\()["'](KOTAE_[A-Z0-9_]+)["']"""
)


def test_every_variable_the_project_reads_itself_is_known() -> None:
    """What scripts, deployment files and tests read outside the settings class must never be called a typo."""
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.sh", "*.yaml", "*.yml", "Dockerfile", "*.env"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    read = set()
    for name in files:
        path = ROOT / name
        if path.is_file():
            read |= {a or b for a, b in _READS.findall(path.read_text(encoding="utf-8", errors="replace"))}
    assert len(read) >= 10, "no reads of KOTAE_ variables were found: the pattern is wrong"
    assert "KOTAE_DATA_DIR" in read and "KOTAE_VENV" in read
    assert unknown_variables(read) == [], f"known: {sorted(known_variables())[:5]}…"
