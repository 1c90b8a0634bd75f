#!/usr/bin/env bash
# Install kotae with its test extras into ./.venv and run the test suite.
# Tests start their own nats-server; set KOTAE_TEST_NATS_URL to use an existing one.
# Long chaos/soak tests are marked `slow`; they run bounded unless KOTAE_SLOW=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh" test
cd "$root"
exec python -m pytest -q "$@"
