"""``KOTAE_*`` variables that no setting reads: most likely a typo, reported with the closest name.

The settings class ignores variables it does not know (other tools may set ``KOTAE_`` ones), so
``KOTAE_TOPN=3`` would change nothing without a word. Every command warns about them at start-up;
the warning names the closest known variable, as ``difflib`` finds it.

Example::

    for line in unknown_setting_warnings(os.environ):
        print(line, file=sys.stderr)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from kotae.settings import ENV_PREFIX, Settings

#: Variables kotae's scripts, deployment files and tests read themselves, outside the settings class.
OUTSIDE_SETTINGS = frozenset(
    {
        "KOTAE_VENV",  # scripts/venv.sh: the virtualenv to install into
        "KOTAE_REALMODEL",  # the test tier against a local llama.cpp server
        "KOTAE_SLOW",  # the full chaos/soak tests
        "KOTAE_FAULT_RATE",  # tests/reliability: share of model calls that fail
        "KOTAE_SCREENSHOTS",  # the page tests' screenshots folder
        "KOTAE_KB_PATH",  # deploy/compose.yaml: the knowledge base the kb-load job reads
        "KOTAE_YOUTUBE_VIDEO",  # deploy/compose.yaml: the live video ingest follows
    }
)

#: Families of such variables: the test suite's (KOTAE_TEST_NATS_URL, …) and scripts/real-model.sh's.
OUTSIDE_SETTINGS_PREFIXES = ("KOTAE_TEST_", "KOTAE_REAL_MODEL_")


def known_variables() -> frozenset[str]:
    """Every ``KOTAE_*`` name that something in kotae reads."""
    return frozenset(f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields) | OUTSIDE_SETTINGS


def unknown_variables(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(name, closest known name or None)`` for each ``KOTAE_*`` name nothing reads, sorted by name."""
    known = known_variables()
    unknown = []
    for name in sorted(names):
        # Environment names are case-sensitive on POSIX, but the settings class reads them in any case.
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known or upper.startswith(OUTSIDE_SETTINGS_PREFIXES):
            continue
        # Compared without the prefix, which every name shares and would make any two look alike.
        stems = {known_name.removeprefix(ENV_PREFIX): known_name for known_name in known}
        close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), stems, n=1, cutoff=0.6)
        unknown.append((name, stems[close[0]] if close else None))
    return unknown


def unknown_setting_warnings(environ: Mapping[str, str]) -> list[str]:
    """One warning line per unknown ``KOTAE_*`` variable in ``environ``, naming the closest known one."""
    lines = []
    for name, close in unknown_variables(environ):
        hint = f"; did you mean {close}?" if close else "; see the settings table in README.md"
        lines.append(f"kotae: warning: {name} is not a kotae setting and is ignored{hint}")
    return lines
