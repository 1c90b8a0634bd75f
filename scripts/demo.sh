#!/usr/bin/env bash
# Install kotae into ./.venv and run the demo on the embedded stack (no accounts, no network).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
exec kotae demo "$@"
