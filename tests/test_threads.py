"""simulator/base/threads.py: chunks cover the work exactly once, errors surface, any thread count gives the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.base.threads import MIN_CHUNK, chunk_bounds, run_chunked


@given(n=st.integers(0, 500), chunks=st.integers(1, 64))
@settings(max_examples=200, deadline=None)
def test_chunks_cover_the_range_once_in_order(n, chunks):
    b = chunk_bounds(n, chunks)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(lo <= hi for lo, hi in b) and all(b[i][1] == b[i + 1][0] for i in range(len(b) - 1))
    assert len(b) == max(1, min(n, chunks))


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_every_item_written_once_whatever_the_threads(threads):
    n = 1000
    out = np.zeros(n, dtype=np.int64)

    def work(lo, hi):
        out[lo:hi] += np.arange(lo, hi) ** 2

    run_chunked(work, n, threads)
    assert np.array_equal(out, np.arange(n) ** 2)


def test_an_error_in_a_chunk_is_raised_after_all_chunks_ended():
    seen = []

    def work(lo, hi):
        seen.append((lo, hi))
        if lo == 0:
            raise ValueError("chunk 0 failed")

    with pytest.raises(ValueError, match="chunk 0 failed"):
        run_chunked(work, 100, 2)
    assert sorted(seen) == chunk_bounds(100, 100 // MIN_CHUNK)  # every chunk ran (at least MIN_CHUNK items each)


def test_mcpp_pairs_identical_on_one_and_three_threads(monkeypatch):
    """The MCPP kernel's pairs over Python threads: the same wins as one after the other."""
    import simulator.mcpp.anytime as anytime

    monkeypatch.setattr(anytime, "PARALLEL_MIN_S", 0.0)  # even a short decision on the threaded kernel
    from simulator.costs.arrays import CostSetting, dag_arrays
    from simulator.costs.nominal import nominal_budget, nominal_deadline
    from simulator.engine.testing import first_view, layered_dag
    from simulator.mcpp.policy import MCPortfolioPolicy
    from simulator.pools.pool import pool_from_objects

    arr = dag_arrays(pool_from_objects([layered_dag(3, n_nodes=8)]), 0, CostSetting())
    view = first_view(arr, nominal_budget(arr), nominal_deadline(arr))
    scores = []
    for threads in (1, 3):
        pol = MCPortfolioPolicy({"M": 8, "max_candidate_actions": 64, "n_threads": threads})
        pol.reset(arr, 5, 0, 0)
        d = pol.decide(view)
        scores.append((tuple(d.act_model), tuple(d.act_count), d.candidate, d.member, d.score))
    assert scores[0] == scores[1]
