#!/usr/bin/env bash
# The README's quote at two revisions, interleaved, in the current virtual environment (warm numba cache):
#   bash benchmarks/bench_quote.sh BEFORE_REV AFTER_REV [ROUNDS]
# prints, per run: wall and CPU seconds (/usr/bin/time), the episodes simulated, the answer and the load.
# Each revision runs in a copy of its own (git archive, removed at the end); compare the CPU seconds (load-independent
# up to the machine's sharing) and the wall seconds of neighbouring runs.
set -u
before=$1 after=$2 rounds=${3:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
for v in before after; do
  rev=$([ "$v" = before ] && echo "$before" || echo "$after")
  mkdir "$work/$v" && git -C "$repo" archive "$rev" | tar -x -C "$work/$v" || exit 1
  # warm numba's cache of the copy (compiled beside its sources) with a 2-trial quote, not timed
  (cd "$work/$v" && python -m executor quote --pool examples/example_pool.jsonl --dag 0 --deadline 60 \
     --target 0.9 --trials 2 > /dev/null 2>&1)
done
for i in $(seq "$rounds"); do
  for v in before after; do
    cd "$work/$v" || exit 1
    l0=$(cut -d' ' -f1 /proc/loadavg)
    out=$( { /usr/bin/time -f "wall_s=%e cpu_s=%U+%S" nice -n 5 python -m executor quote \
             --pool examples/example_pool.jsonl --dag 0 --deadline 60 --target 0.9; } 2>&1 )
    echo "$v round $i load=$l0..$(cut -d' ' -f1 /proc/loadavg) $(echo "$out" | grep -o 'wall_s=.*')" \
         "$(echo "$out" | grep -o '([0-9]* simulated episodes)')"
    echo "  $(echo "$out" | grep '^cheapest budget')"
  done
done
rm -rf "$work"
