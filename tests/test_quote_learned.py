"""A quote on a learned pool says that its interval leaves out the pool's own sampling error (docs/workflows.md).

The quote's 95% interval is the simulated episodes' binomial noise at the quoted budget; a pool learned from
a few dozen observations per pair is itself a sample, whose error is usually the larger one
(benchmarks/README.md, the quote check over 20 explorations). A pool that is not learned gets no note.
"""

from __future__ import annotations

import json
import subprocess
import sys

from executor.quote_learned import learned_note
from tests.executor_helpers import ENV, ROOT


def _example_line() -> dict:
    with open(ROOT / "examples" / "example_pool.jsonl") as fh:
        return json.loads(fh.readline())


def _learned(line: dict, counts: list[int]) -> dict:
    line = json.loads(json.dumps(line))
    line["learned"] = {"traces": [{"trace_id": f"t{i}"} for i in range(3)]}
    k = 0
    for n in line["nodes"]:
        meta = {}
        for m in n.get("model_templates") or {}:
            meta[m] = {"live_rows": counts[k % len(counts)], "prior_rows": 0}
            k += 1
        n["model_node_metadata"] = meta
    return line


def test_the_note_names_the_counts_and_only_learned_pools_get_one():
    line = _example_line()
    assert learned_note(line) is None
    note = learned_note(_learned(line, [30, 51, 0]))
    assert note is not None and "3 trace(s)" in note and "30-51 live observations" in note
    assert "not the pool's own sampling error" in note
    assert "prior rows only" in learned_note(_learned(line, [0]))


def test_quote_on_a_learned_pool_prints_the_note(tmp_path):
    pool = tmp_path / "learned.jsonl"
    pool.write_text(json.dumps(_learned(_example_line(), [30, 40])) + "\n")
    cmd = [sys.executable, "-m", "executor", "quote", "--pool", str(pool), "--dag", "0", "--deadline-ratio", "1.5",
           "--target", "0.5", "--method", "sequential", "--trials", "20"]
    r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    note = [i for i, x in enumerate(lines) if x.startswith("note: this pool was learned from 3 trace(s)")]
    answer = [i for i, x in enumerate(lines) if x.startswith("cheapest budget:")]
    assert len(note) == 1 and len(answer) == 1 and note[0] < answer[0], r.stdout
    plain = subprocess.run(cmd[:5] + [str(ROOT / "examples" / "example_pool.jsonl")] + cmd[6:], cwd=ROOT, env=ENV,
                           capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and "note:" not in plain.stdout, plain.stderr[-2000:]
