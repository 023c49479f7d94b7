#!/usr/bin/env bash
# Experiment harness: bash run_experiment.sh ACTION   (bash run_experiment.sh help)
# Settings are environment variables (docs/harness.md); this wrapper only finds
# the repository and the interpreter (PYTHON, else python3) and hands over to
# the Python package harness/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "error: PYTHON (environment): expected an executable (path or command on PATH), got '$PY' (not found)" >&2
    exit 2
fi
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m harness.cli "$@"
