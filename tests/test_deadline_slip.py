"""A deadline slip is explained (issue 41, item 10): the end event says whether starvation explains it.

The rule (:func:`executor.starvation.explain_slip`) is a pure function,
tested row by row. Two real runs check the measures behind it: a run whose
event loop is held by work on it (a blocking call planted in its planner
path) slips and is *not* explained by starvation; a run whose process is
starved of CPU (pinned to one CPU beside a busy process, itself at the
lowest CPU priority, ``SCHED_IDLE``) slips and *is*. The old end event said
nothing of either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from executor.starvation import SLIP_SLACK_S, explain_slip, schedstat
from tests.executor_helpers import ROOT, nominal, run_one, workflow


@pytest.mark.parametrize("wall, deadline, lag, wait, expect", [
    (1.0, 1.0, 0.0, 0.0, None),                # on time
    (1.4, 1.0, 0.3, 0.0, None),                # within the slack
    (2.0, 1.0, 0.9, 0.6, True),                # 0.5 s beyond the slack, 0.6 s waiting for a CPU: starved
    (2.0, 1.0, 0.9, 0.4, False),               # waited less than the slip beyond the slack: the loop was held
    (3.0, 1.0, 2.0, None, False),              # the kernel does not say: not explained
])
def test_the_rule_per_case(wall, deadline, lag, wait, expect):
    got = explain_slip(wall, deadline, lag, wait)
    if expect is None:
        assert got is None
    else:
        assert got["starvation_explains"] is expect and got["slip_s"] == pytest.approx(wall - deadline)
        assert got["why"].startswith("starvation" if expect else ("not starvation" if wait is not None else "unknown"))


def test_the_end_event_records_the_loop_lag_and_the_cpu_wait():
    pool, wf = workflow()
    B, D = nominal(wf)
    res, _, tr = run_one(wf, pool, "sequential", 2 * B, 3 * D, scale=0.01)
    end = tr.events[-1]
    assert end["event"] == "end" and end["loop_lag_max_s"] >= 0
    if schedstat() is not None:
        assert end["cpu_wait_s"] >= 0 and end["process_cpu_wait_s"] >= 0


def test_a_loop_held_by_work_on_it_slips_and_starvation_does_not_explain_it(monkeypatch):
    from executor import live

    pool, wf = workflow()
    B, D = nominal(wf)
    real = live.LiveRun.write_ledger
    held = []

    def blocking_ledger(self):
        if not held:  # once, on the loop: a synchronous call that holds it past the deadline
            held.append(1)
            t0 = time.process_time()
            while time.process_time() - t0 < 0.3 + D * 0.01 + SLIP_SLACK_S + 0.3:  # CPU work, not a wait for one
                pass
        return real(self)

    monkeypatch.setattr(live.LiveRun, "write_ledger", blocking_ledger)
    res, _, tr = run_one(wf, pool, "sequential", 2 * B, D, scale=0.01)
    end = tr.events[-1]
    assert res.wall_s > D * 0.01 + SLIP_SLACK_S
    assert end["slip"]["starvation_explains"] is False, end
    assert end["loop_lag_max_s"] > 0 or end["slip"]["why"].startswith("not starvation")
    from executor.trace import summarize

    assert summarize(tr.events)["deadline_slip"].startswith("not starvation")  # the summary says why


STARVED = """
import asyncio, json, os, subprocess, sys, time
from tests.executor_helpers import nominal, one_run, workflow
pool, wf = workflow()
B, D = nominal(wf)
asyncio.run(one_run(wf, pool, "sequential", 2 * B, 3 * D, scale=0.01))  # warm: kernels and imports, not starved
os.sched_setaffinity(0, {0})
hog = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\\nwhile True: pass"])
time.sleep(0.5)
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # every thread of ours yields to the hog
try:
    res, _, tr = asyncio.run(one_run(wf, pool, "sequential", 2 * B, 0.5 * D, scale=0.01))
finally:
    hog.kill()
print(json.dumps(tr.events[-1]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or schedstat() is None, reason="needs Linux scheduling and schedstat")
def test_a_starved_run_slips_and_says_starvation_explains_it():
    p = subprocess.run([sys.executable, "-c", STARVED], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-3000:]
    end = json.loads(p.stdout.strip().splitlines()[-1])
    assert end["cpu_wait_s"] > 0.2, end
    if "slip" in end:  # starved that much, a slip is almost certain; when it comes, it is explained
        assert end["slip"]["starvation_explains"] is True, end
