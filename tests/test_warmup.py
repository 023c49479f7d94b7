"""The cold-start warm-up of ``local`` (harness/warmup.py): when it runs, and that it changes nothing recorded.

Why these: the warm-up is only worth its processes when at least two kernel
groups are cold and several workers would otherwise compile them all twice
over; and like any speed-up it must not touch a record.
"""

from __future__ import annotations

import os

import pytest
from harness_util import config_env, harness, merged_records_no_timing, small_pool

from harness import warmup
from simulator.base import prewarm


def _cached(monkeypatch, *groups):
    stems = {s for g in groups for s in warmup.GROUP_KERNELS[g]}
    monkeypatch.setattr(prewarm, "cache_has", lambda want: all(s in stems for s in want))


@pytest.mark.parametrize(
    "methods, cached, expected",
    [
        (["sequential", "mc_portfolio_rollout"], (), ["baseline", "mcpp"]),
        (["sequential", "mc_portfolio_rollout", "loader_static"], (), ["baseline", "mcpp", "other"]),
        (["sequential", "loader_static"], (), ["baseline", "other"]),
        (["sequential", "mc_portfolio_rollout"], ("baseline",), []),  # one cold group: a worker is as fast
        (["sequential", "mc_portfolio_rollout", "loader_static"], ("baseline",), ["mcpp", "other"]),
        (["sequential", "mc_portfolio_rollout"], ("baseline", "mcpp"), []),  # warm
        (["sequential", "uniform"], (), []),  # one group only
        (["loader_static", "loader_dual"], (), []),  # no group with known kernels: nothing tells cold from warm
    ],
)
def test_groups_to_warm(monkeypatch, methods, cached, expected):
    _cached(monkeypatch, *cached)
    assert warmup.groups_to_warm(methods, "published") == expected


def test_execution_rules_move_baselines_out_of_the_compiled_group(monkeypatch):
    """Under the atomic rules a baseline runs as a Python policy: its kernels are the 'other' group's."""
    _cached(monkeypatch)
    assert warmup.group_of_method("sequential", "atomic") == "other"
    assert warmup.groups_to_warm(["sequential", "mc_portfolio_rollout"], "atomic") == ["mcpp", "other"]


def test_no_warm_up_with_one_worker_or_when_switched_off(monkeypatch, tmp_path):
    _cached(monkeypatch)
    said = []
    assert warmup.warm_up(object(), 1, {}, said.append) is None  # never looks at the run
    monkeypatch.setenv("SIMULATOR_PREWARM", "0")
    assert warmup.warm_up(object(), 2, {}, said.append) is None
    assert said == []


@pytest.mark.slow
def test_cold_local_run_warms_up_and_records_are_unchanged(tmp_path):
    """A 2-worker run on an empty cache warms both groups first; a run without the warm-up records the same."""
    pool = small_pool(tmp_path, n=4)
    cache = tmp_path / "numba_cache"
    common = dict(METHOD_SET="sequential,uniform,mc_portfolio_rollout", N_EXEC_TRIALS=3, BUDGET_RATIOS="1",
                  DEADLINE_RATIOS="1 2", N_WORKERS=2, MC_PORTFOLIO_M=4, MC_PORTFOLIO_MAX_CANDIDATE_ACTIONS=8)  # fmt: skip
    a = harness("local", config_env(tmp_path, pool, RUN_NAME="a", NUMBA_CACHE_DIR=cache, **common), "--no-progress")
    if (os.cpu_count() or 1) >= 2 and len(os.sched_getaffinity(0)) >= 2:
        assert "cold numba cache: compiled the baseline, mcpp kernels in parallel" in a.stderr, a.stderr[-2000:]
        assert "failed" not in a.stderr.split("compiled the baseline")[1].splitlines()[0]
    b = harness("local", config_env(tmp_path, pool, RUN_NAME="b", NUMBA_CACHE_DIR=cache, SIMULATOR_PREWARM=0,
                                    **common), "--no-progress")  # fmt: skip
    assert "cold numba cache" not in b.stderr
    runs = tmp_path / "runs"
    ra, rb = merged_records_no_timing(runs / "a"), merged_records_no_timing(runs / "b")
    assert ra == rb and sum(len(v) for v in ra.values()) == 4 * 2 * 3 * 3
