#!/usr/bin/env bash
# Install kotae into ./.venv and run the demo on the embedded stack (no accounts, no network).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
echo "kotae: running the demo (the bundled sample knowledge base and comments, on the embedded stack)" >&2
exec kotae demo "$@"
