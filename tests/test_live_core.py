"""The live run's rule state (:class:`simulator.engine.live_core.LiveCore`): by hand, and driven at random.

* admission by hand: a per-attempt launch (order, reservations, the refusal
  and the attempt number it consumes), an atomic launch (shares, ``WAIT``,
  ``END``, ``STALL``);
* answers, losses and batch ends: the first pass, a node completed only by a
  passed sample, a lost sample neither passes nor runs;
* the stuck test after :meth:`LiveCore.narrow`, the snapshot and a core
  entered from it;
* random event sequences on random small DAGs (hypothesis): what batches in
  flight reserve never exceeds the budget, a batch admitted never exceeds the
  room it was admitted on, an ended batch holds nothing, attempt numbers
  consumed strictly increase per (node, model), completed nodes stay
  completed, ready nodes are unfinished, idle and unlocked.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine import live_core as lc
from simulator.engine.live_core import LiveCore


def _arr(n: int, m: int, parents: list[list[int]], available=None, legacy=None):
    """The few DAG arrays the core reads (positions, parents, availability, legacy models)."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    for v in range(n):
        ptr[v + 1] = ptr[v] + len(parents[v])
    idx = np.array([p for ps in parents for p in ps], dtype=np.int64)
    avail = np.ones((n, m), dtype=np.bool_) if available is None else np.asarray(available, dtype=np.bool_)
    return SimpleNamespace(n=n, m=m, parent_ptr=ptr, parent_idx=idx, available=avail,
                           legacy=np.zeros(n, dtype=np.int64) if legacy is None else np.asarray(legacy))


def _core(n=3, m=2, parents=None, **kw) -> LiveCore:
    parents = parents if parents is not None else [[], [0], []]  # 0 -> 1, and 2 alone
    return LiveCore(_arr(n, m, parents, **kw), np.ones(m, dtype=np.bool_), False, list(range(10, 10 + n)))


def _per_attempt(core: LiveCore, ready, models, counts, budget: float, *, kappa=10.0, ceiling=30.0, unit=1.0,
                 t=0.0):
    held = [sum(sum(b.reservations) for b in core.batches.values())]

    def take(v, j, a, r):
        held[0] += r
        return r

    return list(core.launch_per_attempt(ready, np.array(models), np.array(counts), t,
                                        expected=lambda v, j: kappa, ceiling=lambda v, j: ceiling,
                                        room=lambda v: budget - held[0], unit=unit, take=take))


def test_per_attempt_launch_by_hand():
    core = _core()
    assert core.ready() == [0, 2]
    out = _per_attempt(core, [0, 2], [0, 1, 1], [3, 0, 2], 50.0)
    # node 0 first (the larger count): 30 (the ceiling), 20 (the room), then room 0 < kappa: refused, attempt 2
    (v0, j0, b0, ref0), (v2, j2, b2, ref2) = out
    assert (v0, j0, b0.attempts, b0.reservations, ref0) == (0, 0, [0, 1], [30.0, 20.0], 2)
    assert (v2, j2, b2, ref2) == (2, 1, None, 0)  # nothing left: its first attempt refused, its number consumed
    assert core.attempt_no.reshape(3, 2).tolist() == [[3, 0], [0, 0], [0, 1]]
    assert sorted(core.batches) == [0] and core.ready() == [2]


def test_per_attempt_ties_go_to_the_higher_node_id_and_skip_unusable_models():
    core = _core(available=[[True, True], [True, True], [False, True]])
    out = _per_attempt(core, [0, 2], [0, 1, 0], [1, 0, 1], 100.0)
    assert [o[0] for o in out] == [0]  # node 2's model 0 is not available: skipped, no number consumed
    core = _core()
    assert [o[0] for o in _per_attempt(core, [0, 2], [0, 0, 0], [1, 0, 1], 100.0)] == [2, 0]


def test_a_take_that_cannot_reserve_refuses_its_attempt():
    core = _core()
    out = list(core.launch_per_attempt([0], np.array([0, 0, 0]), np.array([2, 0, 0]), 0.0,
                                       expected=lambda v, j: 1.0, ceiling=lambda v, j: 5.0, room=lambda v: 100.0,
                                       unit=1.0, take=lambda v, j, a, r: None))
    assert out == [(0, 0, None, 0)] and core.attempt_no[0] == 1 and not core.batches


def test_atomic_launch_by_hand():
    core = _core()
    kw = dict(expected=lambda v, j: 10.0, ceiling=lambda v, j: 25.0, unit=1.0, take=lambda v, j, a, r: r)
    adm, opened = core.launch_atomic([0, 2], np.array([0, 0, 1]), np.array([2, 0, 1]), 1.5, budget_left=60.0, **kw)
    assert adm.what == lc.LAUNCH and adm.total == 30.0
    assert [(v, b.j, b.attempts, b.reservations, b.t_launch) for v, b in opened] == [
        (0, 0, [0, 1], [20.0, 20.0], 1.5), (2, 1, [0], [20.0], 1.5)]  # 10 x 60 / 30 each, under the ceiling
    core2 = _core()
    assert core2.launch_atomic([0, 2], np.array([0, 0, 1]), np.array([2, 0, 1]), 0.0, budget_left=20.0,
                               **kw)[0].what == lc.END
    assert core.launch_atomic([0], np.array([1, 0, 0]), np.array([1, 0, 0]), 0.0, budget_left=0.0,
                              **kw)[0].what == lc.WAIT  # (a node in flight is not re-launched by the caller)
    adm = core2.launch_atomic([0, 2], np.array([0, 0, -1]), np.array([1, 0, 1]), 0.0, budget_left=99.0, **kw)[0]
    assert (adm.what, adm.node) == (lc.STALL, 2)
    assert not core2.batches and core2.attempt_no.sum() == 0  # a launch that does not happen consumes nothing


def test_answers_losses_and_batch_ends():
    core = _core()
    _, opened = core.launch_atomic([0, 2], np.array([0, 0, 0]), np.array([3, 0, 1]), 0.0, budget_left=100.0,
                                   expected=lambda v, j: 1.0, ceiling=lambda v, j: 5.0, unit=1.0,
                                   take=lambda v, j, a, r: r)
    assert core.answer(0, 1, False) == (False, False)
    assert core.answer(0, 0, True) == (True, False)  # the batch's first pass; one sample still running
    assert core.inflight(lambda v, j, e: 7.0, 2.0) == [(0, 0, [7.0], True), (2, 0, [7.0], False)]
    core.lose(0, 2)
    assert core.batches[0].running() == 0 and not core.all_answered(0)
    with pytest.raises(ValueError):
        core.answer(0, 2, True)  # a lost sample does not answer
    assert core.answer(2, 0, False) == (False, True)  # its one sample answered: the batch is over
    assert core.end_batch(0).passed and core.completed.tolist() == [True, False, False]
    assert not core.end_batch(2).passed and core.completed.tolist() == [True, False, False]
    assert core.ready() == [1, 2] and not core.batches  # node 2 failed: ready again; 1 unlocked
    assert core.end_batch(2) is None


def test_a_batch_that_ends_at_its_first_pass():
    """``early_end`` (the executor's ``cancel_siblings``): a pass ends the batch, its running samples to cancel."""
    core = LiveCore(_arr(1, 1, [[]]), np.ones(1, dtype=np.bool_), False, [0], early_end=True)
    core.launch_atomic([0], np.array([0]), np.array([3]), 0.0, budget_left=9.0, expected=lambda v, j: 1.0,
                       ceiling=lambda v, j: 3.0, unit=1.0, take=lambda v, j, a, r: r)
    assert core.answer(0, 0, False) == (False, False)
    assert not core.batches[0].completes(True)
    assert core.answer(0, 2, True) == (True, True) and core.running(0) == [1]
    assert core.batches[0].completes(True) and not core.batches[0].completes(False)


def test_stuck_after_narrowing_and_a_running_sample_that_may_pass():
    core = _core()
    core.launch_atomic([2], np.array([0, 0, 0]), np.array([0, 0, 1]), 0.0, budget_left=10.0,
                       expected=lambda v, j: 1.0, ceiling=lambda v, j: 5.0, unit=1.0, take=lambda v, j, a, r: r)
    core.narrow([(2, 0), (2, 1)])
    assert core.stuck() == -1  # its running sample may still pass
    core.answer(2, 0, False)
    assert core.stuck() == 2
    core.narrow([(0, 0), (0, 1)])
    assert core.stuck() == 0


def test_snapshot_and_a_core_entered_from_it():
    core = _core()
    _, opened = core.launch_atomic([0, 2], np.array([0, 0, 1]), np.array([2, 0, 2]), 1.0, budget_left=40.0,
                                   expected=lambda v, j: 10.0, ceiling=lambda v, j: 100.0, unit=0.0,
                                   take=lambda v, j, a, r: r)
    core.answer(2, 0, True)
    snap = core.snapshot(4.0)
    assert snap.attempt_no.tolist() == core.attempt_no.tolist()
    assert [(f.v, f.j, f.elapsed, f.running, f.reservation, f.passed) for f in snap.inflight] == [
        (0, 0, 3.0, 2, 10.0, False), (2, 1, 3.0, 1, 10.0, True)]
    again = LiveCore(core.arr, core.mask, False, core.node_ids, start=snap)
    assert again.attempt_no.tolist() == core.attempt_no.tolist() and sorted(again.batches) == [0, 2]
    assert again.batches[2].running() == 1 and not again.batches[2].passed  # its view: its own samples only
    again.answer(2, 0, False)
    again.end_batch(2)
    assert again.completed[2]  # a sample that passed before the snapshot completes the node


# -- random event sequences on random small DAGs ----------------------------------------


@st.composite
def _dags(draw):
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 3))
    parents = [sorted(draw(st.sets(st.integers(0, v - 1), max_size=2))) if v else [] for v in range(n)]
    avail = [[draw(st.booleans()) or j == 0 for j in range(m)] for _ in range(n)]
    # expected costs > 0: an atomic launch expected to cost nothing shares the whole budget left with each
    # sample (live_rules.atomic_reservation), so its reservations may sum to more than the budget (left as is)
    kappa = [[draw(st.sampled_from([0.5, 1.0, 3.0, 7.5])) for _ in range(m)] for _ in range(n)]
    return n, m, parents, avail, kappa


_EVENTS = st.lists(st.tuples(st.sampled_from(["attempts", "atomic", "answer", "lose", "end", "narrow"]),
                             st.integers(0, 1_000), st.booleans()), max_size=40)


@settings(max_examples=150, deadline=None)
@given(dag=_dags(), events=_EVENTS, budget=st.sampled_from([0.0, 5.0, 20.0, 100.0]),
       unit=st.sampled_from([0.0, 1.0]))
def test_random_event_sequences_keep_the_core_invariants(dag, events, budget, unit):
    n, m, parents, avail, kappa = dag
    core = LiveCore(_arr(n, m, parents, available=avail), np.ones(m, dtype=np.bool_), False, list(range(n)))
    spent = [0.0]  # a batch holds its reservations until it ends, then is charged half of them
    last = {}  # (v, j) -> the last attempt number seen consumed

    def held() -> float:
        return sum(sum(b.reservations) for b in core.batches.values())

    def room(v) -> float:
        return budget - spent[0] - held() - pending[0]

    pending = [0.0]

    def take(v, j, a, r):
        assert r <= room(v) + 1e-9, (r, room(v))  # a reservation never exceeds the room it is admitted on
        assert a > last.get((v, j), -1)
        last[(v, j)] = a
        pending[0] += r
        return r

    rng = np.random.default_rng(0)
    for kind, x, flag in events:
        before = core.completed.copy()
        ready = core.ready()
        models = np.array([x % (m + 1) - 1 for _ in range(n)], dtype=np.int64) if flag else rng.integers(0, m, n)
        counts = np.array([(x >> v) % 3 for v in range(n)], dtype=np.int64)
        if kind == "attempts" and ready:
            pending[0] = 0.0
            for v, j, _, refused in core.launch_per_attempt(ready, models, counts, 0.0,
                                                            expected=lambda v, j: kappa[v][j],
                                                            ceiling=lambda v, j: 6.0, room=room, unit=unit,
                                                            take=take):
                if refused >= 0:
                    assert refused > last.get((v, j), -1)
                    last[(v, j)] = refused
                pending[0] = 0.0
        elif kind == "atomic" and ready:
            left = budget - spent[0] - held()
            pending[0] = 0.0
            adm, opened = core.launch_atomic(ready, models, counts, 0.0, expected=lambda v, j: kappa[v][j],
                                             ceiling=lambda v, j: 6.0, budget_left=left, unit=unit,
                                             take=lambda v, j, a, r: r)
            assert sum(sum(b.reservations) for _, b in opened) <= left + 1e-9
            for _, b in opened:
                for (v, b2) in opened:
                    if b2 is b:
                        assert b.attempts == sorted(b.attempts) and b.attempts[0] > last.get((v, b.j), -1)
                        last[(v, b.j)] = b.attempts[-1]
            pending[0] = 0.0
        elif kind in ("answer", "lose") and core.batches:
            v = sorted(core.batches)[x % len(core.batches)]
            b = core.batches[v]
            live = [i for i, s in enumerate(b.states) if s == lc.RUNNING]
            if live:
                i = live[x % len(live)]
                if kind == "answer":
                    first, over = core.answer(v, i, flag)
                    assert first == (flag and sum(s == lc.PASSED for s in b.states) == 1)
                    assert over == (b.answered() == len(b.states))  # no early end: over once all answered
                else:
                    core.lose(v, i)
        elif kind == "end" and core.batches:
            v = sorted(core.batches)[x % len(core.batches)]
            b = core.end_batch(v)
            assert v not in core.batches and core.completed[v] == (b.passed or before[v])
            spent[0] += sum(b.reservations) / 2  # settled at its end: charged half, the rest free again
        elif kind == "narrow":
            core.narrow([(x % n, x % m)])
        # invariants after every event
        assert spent[0] + held() <= budget + 1e-9  # the budget is hard: what batches hold fits
        assert np.all(core.completed >= before)  # a completed node stays completed
        for v in core.ready():
            assert not core.completed[v] and v not in core.batches and all(core.completed[p] for p in parents[v])
        for v, b in core.batches.items():
            assert not core.completed[v] and len(b.attempts) == len(b.reservations) == len(b.states) > 0
        for (v, j), a in last.items():
            assert core.attempt_no[v * m + j] == a + 1  # numbers consumed in order, none skipped or reused
