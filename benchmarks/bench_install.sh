#!/usr/bin/env bash
# README command 1 in a fresh clone and a fresh virtual environment, for two revisions, interleaved:
#   bash benchmarks/bench_install.sh BEFORE_REV AFTER_REV [ROUNDS]
# prints, per run: install and run seconds, the venv's size (du), the load average before and after.
# Wall times depend on the machine's load; the venv's size does not.
set -u
before=$1 after=$2 rounds=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
unset NUMBA_CACHE_DIR VIRTUAL_ENV
for i in $(seq "$rounds"); do
  for v in before after; do
    rev=$([ "$v" = before ] && echo "$before" || echo "$after")
    d="$work/$v$i"
    git clone -q "$repo" "$d" && git -C "$d" checkout -q "$rev"
    cd "$d" || exit 1
    l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s.%N)
    python3 -m venv .venv && . .venv/bin/activate && pip install -q -r requirements.txt > "$work/$v$i.pip" 2>&1
    t1=$(date +%s.%N)
    N_DAGS=8 N_EXEC_TRIALS=10 BUDGET_RATIOS="0.5 1 2" bash run_experiment.sh local > "$work/$v$i.run" 2>&1; rc=$?
    t2=$(date +%s.%N); l1=$(cut -d' ' -f1 /proc/loadavg)
    deactivate
    echo "$v ($rev) round $i rc=$rc install_s=$(echo "$t1-$t0" | bc) run_s=$(echo "$t2-$t1" | bc)" \
         "venv=$(du -sh .venv | cut -f1) load=$l0..$l1"
    rm -rf "$d"
  done
done
rm -rf "$work"
