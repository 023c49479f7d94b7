#!/usr/bin/env bash
# Experiment harness: bash run_experiment.sh ACTION   (bash run_experiment.sh help)
# Settings are environment variables (docs/harness.md); this wrapper only finds
# the repository and hands over to the Python package harness/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m harness.cli "$@"
