"""MCPP (``mc_portfolio_rollout``): Monte Carlo Portfolio Planning as a simulator policy.

At each decision MCPP lists candidate actions (:mod:`simulator.mcpp.candidates`),
estimates for every (candidate, portfolio member Seq-(m, k)) pair the
probability of completing the rest of the DAG within the remaining budget and
time by M compiled simulations (:mod:`simulator.mcpp.kernel`), and executes
the candidate of the best pair (first strict maximum; all-zero -> the first
base action). Its registry entry is :data:`METHODS` (listed in
:mod:`simulator.methods`): atomic launch, hard deadline, parameters from the
run's ``mcpp`` settings, variants such as ``mc_portfolio_rollout[crn]``.

The planner state is the :class:`~simulator.engine.episode.DecisionView`: in-flight
attempts keep their exact remaining times; their successes are redrawn as
Bernoulli(p) at finish unless the batch already had a success. The planner
may use statistics (``planning_arr``) that differ from execution.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numba
import numpy as np

from simulator.base.errors import ConfigError
from simulator.base.rng import STREAM_PLANNER, make_key
from simulator.base.threads import start_threads
from simulator.costs.arrays import DagArrays
from simulator.engine.episode import DecisionView, Policy
from simulator.engine.live_rules import charge_ceilings, reservation_unit
from simulator.engine.registry import ATOMIC, HARD, PYTHON_POLICY, MethodSpec
from simulator.mcpp.anytime import MemberTables, Rates, evaluate_auto, pair_scores, race
from simulator.mcpp.candidates import (
    CORRECTED_FULL,
    FULL,
    actions_to_arrays,
    candidates_key,
    faithful_draw,
    generate_candidates,
)
from simulator.mcpp.kernel import (
    NO_CEILING,
    DecisionState,
    plan_bounds,
    run_pairs,
    run_pairs_serial,
    surely_failing,
)
from simulator.mcpp.params import (
    MCPP,
    MCPPParams,
    add_mcpp_arguments,
    mcpp_params_from_args,
    mcpp_params_from_env,
    resolve_params,
)
from simulator.mcpp.reuse import STATE_TRIAL, DecisionMemo, state_digest

__all__ = [
    "Decision",
    "MCPortfolioPolicy",
    "SeqMemberPolicy",
    "FirstActionThenMember",
    "add_mcpp_arguments",
    "mcpp_params_from_args",
    "mcpp_params_from_env",
    "hoeffding_epsilon",
]

PREFIX = "mc_portfolio_"
#: candidate modes that draw nothing: their list is a function of the ready set alone (cached per episode)
KEYLESS_MODES = (FULL, CORRECTED_FULL)
#: faithful candidate lists kept per episode tables by (ready set, draw) (emptied when full: memory stays bounded)
KEYED_LISTS = 256


def hoeffding_epsilon(n_pairs: int, M: int, delta: float) -> float:
    """Uniform Hoeffding half-width over ``n_pairs`` estimates of M samples each."""
    if n_pairs <= 0 or M <= 0:
        return math.inf
    return math.sqrt(math.log(2.0 * n_pairs / delta) / (2.0 * M))


@dataclass
class Decision:
    """One MCPP decision: the action, its estimate and what it cost to find."""

    act_model: np.ndarray  # int64 (n,) model position per node (-1 = none)
    act_count: np.ndarray  # int64 (n,) count per node (0 = none)
    candidate: int  # index of the chosen candidate
    member: int  # index of the best member (model position, k) = members[member]
    score: float  # best pair's success fraction (the completion estimate)
    mode: str
    n_candidates: int
    n_base: int
    n_pairs: int
    n_simulations: int
    epsilon: float
    wall_ms: float
    members: list[tuple[int, int]]
    anytime: dict | None = None  # anytime planner only: simulations run, interval, limit hit (AnytimeResult.record)
    reused: bool = False  # reuse="state": taken from an identical earlier state (no simulation run for it)

    def summary(self) -> dict:
        out = {
            "mode": self.mode,
            "candidates": self.n_candidates,
            "pairs": self.n_pairs,
            "simulations": self.n_simulations,
            "best_score": self.score,
            "epsilon": self.epsilon,
            "wall_ms": self.wall_ms,
        }
        if self.anytime is not None:
            out["anytime"] = self.anytime
        if self.reused:
            out["reused"] = True
        return out


class _EpisodeTables:
    """Flat per-(DAG, episode) tables of the planning statistics (built once, not per decision)."""

    def __init__(self, parr: DagArrays) -> None:
        self.arr = parr
        self.bounds = plan_bounds(parr)
        indeg = np.diff(parr.parent_ptr)
        self.edge_child = np.repeat(np.arange(parr.n, dtype=np.int64), indeg)
        self.members: MemberTables | None = None  # anytime planner's mean-field tables (built on first use)
        # the live rules' tables (largest charge per (node, model), reservation unit): member simulations under
        # the live execution rules cap their samples as a live run does
        self.ceiling = charge_ceilings(parr)
        self.unit = reservation_unit(parr)
        # per-episode caches of what a decision derives from fixed inputs alone (never written to afterwards):
        # the candidate arrays of a ready set whose candidates need no draw (``KEYLESS_MODES``), the members'
        # arrays and the (candidate, member) pair indices of a shape
        self.keyless: dict[tuple[int, ...], tuple] = {}
        self.keyed: dict[tuple, tuple] = {}  # the faithful lists by (ready set, draw): ``prepare``
        self.member_arrays: tuple[np.ndarray, np.ndarray] | None = None
        self.pairs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def pair_indices(self, C: int, Pm: int) -> tuple[np.ndarray, np.ndarray]:
        """(candidate, member) of each pair i, in (candidate, member) order (cached per shape)."""
        got = self.pairs.get((C, Pm))
        if got is None:
            got = self.pairs[(C, Pm)] = (np.repeat(np.arange(C, dtype=np.int64), Pm),
                                         np.tile(np.arange(Pm, dtype=np.int64), C))  # fmt: skip
        return got

    def member_tables(self, members: list[tuple[int, int]]) -> MemberTables:
        if self.members is None:
            from simulator.pools.graph import topological_order

            a = self.arr
            order = topological_order(a.parent_ptr, a.parent_idx, a.child_ptr, a.child_idx)
            self.members = MemberTables(a, members, np.asarray(order, dtype=np.int64))
        return self.members


class MCPortfolioPolicy(Policy):
    """The MCPP planner (``docs/policies.md``, faithful by default).

    ``params`` holds any :class:`~simulator.mcpp.params.MCPPParams` key
    (keyword arguments override it) plus runtime-only keys: ``dag_model_ids``
    (the DAG's model names, to resolve ``model_ids`` given as names),
    ``n_threads`` (numba threads; 0 = numba's default) and
    ``record_decisions`` (keep every decision's summary in the diagnostics).
    """

    name = MCPP
    plans = True
    uses_planning_arr = True

    @property
    def episode_tables(self) -> _EpisodeTables | None:
        """The episode's tables (built by :meth:`reset`): what the surface's batched decision shares."""
        return self._episode

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        planning_arr: DagArrays | None = None,
        **overrides: Any,
    ) -> None:
        raw = {**dict(params or {}), **overrides}
        self.params: MCPPParams = resolve_params(raw)
        self.dag_model_ids = raw.get("dag_model_ids")
        self.n_threads = int(raw.get("n_threads") or 0)
        self.record_decisions = bool(raw.get("record_decisions", False))
        # the launch rule the planner's simulations follow: the execution's (execution-rule modes; atomic by default)
        rule = raw.get("launch_rule", "atomic")
        self.per_attempt = rule == "per_attempt"
        self.live = rule == "live_atomic"  # the live execution rules (simulator.engine.live_rules)
        # exact shortcuts; off only to test they are exact, and under the per-attempt and live rules (they assume
        # atomic costs and draw-time failures)
        self.prune = bool(raw.get("prune", True)) and not self.per_attempt and not self.live
        # the argmax's early stop (``run_pairs_serial``'s ``beat_best``) counts wins only: exact under every rule
        self.beat_best = bool(raw.get("prune", True))
        self.planning_arr = planning_arr
        self._episode: _EpisodeTables | None = None
        self._decisions: list[Decision] = []
        self._models: np.ndarray | None = None
        self._rates: Rates | None = None  # anytime planner: measured kernel speeds (serial / parallel)
        self._loaded = False  # anytime planner: compiled kernels loaded in this process
        self._memo = DecisionMemo()  # reuse="state": decisions by planner state

    # -- model positions ---------------------------------------------------------------

    def model_positions(self, arr: DagArrays) -> np.ndarray:
        """Positions (in the DAG's model order) of the portfolio models."""
        ids = self.params.model_ids
        if ids is None:
            return np.arange(arr.m, dtype=np.int64)
        names = list(self.dag_model_ids) if self.dag_model_ids is not None else None
        pos: list[int] = []
        for x in ids:
            if isinstance(x, int) or (isinstance(x, str) and x.isdigit() and (names is None or x not in names)):
                j = int(x)
                if not 0 <= j < arr.m:
                    raise ConfigError(f"MCPP model position {j} out of range (the DAG has {arr.m} models)")
                pos.append(j)
            elif names is None:
                raise ConfigError(f"MCPP model {x!r} given by name but the DAG's model names are unknown")
            elif x in names:
                pos.append(names.index(x))
        if not pos:
            raise ConfigError(f"none of the MCPP models {list(ids)} is in this DAG (it has {names})")
        return np.array(pos, dtype=np.int64)

    def resolved_model_ids(self) -> list | None:
        """The portfolio as used on this DAG: model names when the DAG's names are known, else positions.

        This, not the requested ``model_ids`` (``None`` = every model), is
        what each record carries, so a record names the models that produced it.
        """
        if self._models is None:
            return list(self.params.model_ids) if self.params.model_ids is not None else None
        if self.dag_model_ids is not None:
            return [str(self.dag_model_ids[j]) for j in self._models]
        return [int(j) for j in self._models]

    def _params_record(self) -> dict:
        """``self.params.record()`` (the params are frozen: built once per policy), a fresh copy each call."""
        rec = self.__dict__.get("_params_rec")
        if rec is None:
            rec = self._params_rec = self.params.record()
        return {k: (list(v) if isinstance(v, list) else v) for k, v in rec.items()}

    def members(self) -> list[tuple[int, int]]:
        """The portfolio Seq-(m, k) as (model position, k), in (model, k) order."""
        return [(int(j), int(k)) for j in self._models for k in self.params.base_ks]

    # -- Policy protocol -----------------------------------------------------------------

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        parr = self.planning_arr if self.planning_arr is not None else arr
        if parr.n != arr.n or parr.m != arr.m:
            raise ConfigError(
                f"planning statistics ({parr.n} nodes, {parr.m} models) do not match the DAG "
                f"({arr.n} nodes, {arr.m} models)"
            )
        if self._episode is None or self._episode.arr is not parr:
            self._episode = _EpisodeTables(parr)
            self._models = self.model_positions(parr)
        if self.params.anytime:  # built here, outside the first decision's time limit
            self._episode.member_tables(self.members())
            if not self._loaded:  # load the compiled helpers of a decision (the kernels: at the first decision)
                candidates_key(seed, dag, trial, 0)
                make_key(seed, dag, trial, STREAM_PLANNER, 0, 0, 0)
                numba.get_num_threads()  # the thread setting (its first call loads numba's threading layer)
        self._decisions = []

    def act(self, view: DecisionView) -> tuple[np.ndarray, np.ndarray] | None:
        if self._episode is None:
            self.reset(view.arr, view.seed, view.dag, view.trial)
        d = self.decide(view)
        if d is None:
            return None
        self._decisions.append(d)
        return d.act_model, d.act_count

    def episode_diagnostics(self) -> dict:
        ds = self._decisions
        p = PREFIX
        out: dict[str, Any] = {
            p + "decisions": len(ds),
            p + "candidates_total": int(sum(d.n_candidates for d in ds)),
            p + "pairs_total": int(sum(d.n_pairs for d in ds)),
            p + "simulations_total": int(sum(d.n_simulations for d in ds)),
            p + "candidate_modes": dict(Counter(d.mode for d in ds)),
            p + "best_score_first": ds[0].score if ds else None,
            p + "best_score_mean": float(np.mean([d.score for d in ds])) if ds else None,
            p + "best_score_min": float(min(d.score for d in ds)) if ds else None,
            p + "epsilon_max": float(max(d.epsilon for d in ds)) if ds else None,
            p + "wall_ms_total": float(sum(d.wall_ms for d in ds)),
            p + "wall_ms_max": float(max(d.wall_ms for d in ds)) if ds else 0.0,
            p + "params": {**self._params_record(), "model_ids": self.resolved_model_ids()},
        }
        if self.params.anytime:  # only then: the faithful records keep their fields
            any_ = [d.anytime for d in ds if d.anytime is not None]
            out[p + "anytime_limit_hits"] = int(sum(a["limit_hit"] for a in any_))
            out[p + "anytime_interval_first"] = any_[0]["interval"] if any_ else None
            out[p + "anytime_interval_width_max"] = (
                float(max(a["interval"][1] - a["interval"][0] for a in any_)) if any_ else None
            )
        if self.params.reuse != "off":
            out[p + "decisions_reused"] = int(sum(d.reused for d in ds))
        if self.record_decisions:
            out[p + "decision_log"] = [d.summary() for d in ds]
        return out

    # -- the planner -----------------------------------------------------------------------

    def decide(self, view: DecisionView) -> Decision | None:
        """Plan one decision from ``view`` (None when a ready node has no portfolio model)."""
        t0 = time.perf_counter()
        if self._episode is None:
            self.reset(view.arr, view.seed, view.dag, view.trial)
        tb = self._episode
        parr = tb.arr
        P = self.params
        if P.reuse == "state":  # the draws are keyed by the state; an identical state takes its decision
            digest = state_digest(view)
            memo = self._memo.for_arrays(parr)
            seen = memo.get(digest)
            if seen is not None:
                return replace(
                    seen,
                    act_model=seen.act_model.copy(),
                    act_count=seen.act_count.copy(),
                    n_simulations=0,
                    wall_ms=(time.perf_counter() - t0) * 1000.0,
                    reused=True,
                )
            key_trial, key_decision = STATE_TRIAL, digest
        else:
            key_trial, key_decision = view.trial, view.decision_index
        prep = self.prepare(view, key_trial, key_decision)
        if prep is None:
            return None
        mode, n_base, cand_model, cand_count, members, dec = prep
        C, Pm = cand_model.shape[0], len(members)

        def evaluate_on(pc: np.ndarray, pm: np.ndarray, s_lo: int, s_hi: int, parallel: bool,
                        beat_best: bool = False) -> np.ndarray:  # fmt: skip
            out = np.zeros(len(pc), dtype=np.int64)
            if parallel and len(pc) > 1:
                run_pairs(parr, tb.bounds, dec, pc, pm, s_lo, s_hi, out, beat_best=beat_best)
            else:
                run_pairs_serial(parr, tb.bounds, dec, pc, pm, s_lo, s_hi, out, beat_best)
            return out

        if self.n_threads > 0:
            numba.set_num_threads(min(self.n_threads, numba.config.NUMBA_NUM_THREADS))
        threads = numba.get_num_threads()
        if self._rates is None or self._rates.threads != threads:
            self._rates = Rates(threads)

        def evaluate(pc: np.ndarray, pm: np.ndarray, s_lo: int, s_hi: int, beat_best: bool = False) -> np.ndarray:
            if threads <= 1:
                return evaluate_on(pc, pm, s_lo, s_hi, False, beat_best)
            # chunks on the faster kernel (same results: every simulation has its own key)
            on = (lambda *a: evaluate_on(*a, True)) if beat_best else evaluate_on
            return evaluate_auto(on, pc, pm, s_lo, s_hi, self._rates)
        pair_c, pair_m = tb.pair_indices(C, Pm)
        anytime = None
        best_n = P.M
        if P.anytime:
            # the race aims 3% early: the choice and the return take a little time too; a simulation limit has no
            # clock (the same state gives the same decision, whatever the machine's load)
            stop = t0 + 0.97 * P.time_limit_ms / 1000.0 if P.time_limit_ms is not None else math.inf
            res, load_ms = self._anytime(evaluate_on, dec, members, pair_c, pair_m, stop)
            best_i, best_wins, n_sims, best_n = res.pair, res.wins, res.simulations, max(res.n, 1)
            n_pairs_eval = C * Pm
            anytime = {**res.record(), "load_ms": load_ms}  # load_ms: first-call loading, outside the limit
        elif P.evaluation in ("halving", "crn_halving"):
            best_i, best_wins, n_sims = self._halving(evaluate, pair_c, pair_m)
            n_pairs_eval = C * Pm
        else:
            wins = evaluate(pair_c, pair_m, 0, P.M, beat_best=self.beat_best)  # pairs that cannot win stop early (-1)
            best_i = int(np.argmax(wins))  # first strict maximum in (candidate, member) order
            best_wins = int(wins[best_i])
            n_sims = C * Pm * P.M
            n_pairs_eval = C * Pm
        if best_wins == 0:
            best_c, best_p = 0, 0  # never give up: the first base action
        else:
            best_c, best_p = int(pair_c[best_i]), int(pair_m[best_i])
        act_model = np.full(parr.n, -1, dtype=np.int64)
        act_count = np.zeros(parr.n, dtype=np.int64)
        act_model[dec.ready] = cand_model[best_c]
        act_count[dec.ready] = cand_count[best_c]
        decision = Decision(
            act_model=act_model,
            act_count=act_count,
            candidate=best_c,
            member=best_p,
            score=best_wins / best_n,
            mode=mode,
            n_candidates=C,
            n_base=n_base,
            n_pairs=n_pairs_eval,
            n_simulations=int(n_sims),
            epsilon=hoeffding_epsilon(n_pairs_eval, best_n, P.delta),
            wall_ms=(time.perf_counter() - t0) * 1000.0,
            members=members,
            anytime=anytime,
        )
        if P.reuse == "state":
            memo.put(digest, replace(decision, act_model=act_model.copy(), act_count=act_count.copy()))
        return decision

    def prepare(self, view: DecisionView, key_trial: int | None = None, key_decision: int | None = None):
        """Candidates, members and the kernel's :class:`DecisionState` of one decision (None: no action).

        ``key_trial`` / ``key_decision`` key the draws (default: the view's
        trial and decision index; ``reuse="state"`` passes the state's
        digest). Returns ``(mode, n_base, cand_model, cand_count, members,
        dec)``. The prediction surface (:mod:`simulator.surface`) calls it
        with the largest budget and horizon of the cells that share a
        state, and decides every cell from one evaluation.
        """
        if self._episode is None:
            self.reset(view.arr, view.seed, view.dag, view.trial)
        tb = self._episode
        parr = tb.arr
        P = self.params
        if key_trial is None:
            key_trial, key_decision = view.trial, view.decision_index
        models = self._models
        ready = np.asarray(view.ready, dtype=np.int64)
        ready_key = tuple(ready.tolist())
        known = tb.keyless.get(ready_key)
        ckey = drawn = None
        if known is None and P.candidate_generator == "faithful":
            # the faithful list reads its key only through the free nodes it draws: the same ready set and draw
            # give the same list (kept per episode tables, a bounded number of them)
            ckey = candidates_key(view.seed, view.dag, key_trial, key_decision)
            drawn = (ready_key, faithful_draw(ckey, len(ready_key), P.random_free_n))
            known = tb.keyed.get(drawn)
        if known is not None:  # the same ready set gives the same candidates when no draw picks them
            mode, n_base, cand_model, cand_count = known
        else:
            gen = generate_candidates(
                parr.available,
                ready,
                models,
                P.base_ks,
                P.random_free_n,
                P.exact_cap,
                P.max_candidate_actions,
                candidates_key(view.seed, view.dag, key_trial, key_decision) if ckey is None else ckey,
                P.candidate_generator,
            )
            if gen is None:
                return None
            actions, mode, n_base = gen
            cand_model, cand_count = actions_to_arrays(actions)
            if mode in KEYLESS_MODES:
                tb.keyless[ready_key] = (mode, n_base, cand_model, cand_count)
            elif drawn is not None:
                if len(tb.keyed) >= KEYED_LISTS:
                    tb.keyed.clear()
                tb.keyed[drawn] = (mode, n_base, cand_model, cand_count)
        members = self.members()
        if tb.member_arrays is None:
            tb.member_arrays = (np.array([m for m, _ in members], dtype=np.int64),
                                np.array([k for _, k in members], dtype=np.int64))  # fmt: skip
        mem_model, mem_k = tb.member_arrays

        completed = np.asarray(view.completed, dtype=np.bool_)
        parents_done = np.bincount(
            tb.edge_child, weights=completed[parr.parent_idx].astype(np.float64), minlength=parr.n
        ).astype(np.int64)
        inf_node = np.asarray(view.inflight_node, dtype=np.int64)
        inf_model = np.asarray(view.inflight_model, dtype=np.int64)
        ptr = np.asarray(view.remaining_ptr, dtype=np.int64)
        rem = np.asarray(view.remaining, dtype=np.float64)
        inf_nrem = np.diff(ptr).astype(np.int64)
        inf_end = np.array(
            [float(rem[ptr[q] : ptr[q + 1]].max()) if inf_nrem[q] else 0.0 for q in range(len(inf_node))]
        )
        dec = DecisionState(
            ready=ready,
            cand_model=cand_model,
            cand_count=cand_count,
            mem_model=mem_model,
            mem_k=mem_k,
            completed=completed,
            parents_done=parents_done,
            inf_node=inf_node,
            inf_model=inf_model,
            inf_end=inf_end,
            inf_nrem=inf_nrem,
            inf_already=np.asarray(view.already_success, dtype=np.bool_),
            budget=float(view.budget_left),
            horizon=float(view.deadline - view.t),
            key=np.uint64(make_key(view.seed, view.dag, key_trial, STREAM_PLANNER, key_decision, 0, 0)),
            crn=P.evaluation in ("crn", "crn_halving") or P.anytime,
            prune=self.prune,
            max_steps=int(P.max_rollout_steps),
            per_attempt=self.per_attempt,
            live=self.live,
            ceiling=tb.ceiling if self.live else NO_CEILING,
            unit=tb.unit if self.live else 0.0,
        )
        return mode, n_base, cand_model, cand_count, members, dec

    def _anytime(self, evaluate_on, dec: DecisionState, members, pair_c, pair_m, deadline: float):
        """The anytime evaluation (:mod:`simulator.mcpp.anytime`): exact pruning, ranking, racing."""
        tb = self._episode
        P = self.params
        C, Pm = dec.cand_model.shape[0], len(members)
        fails = surely_failing(tb.arr, tb.bounds, dec) if self.prune else np.zeros((C, Pm), dtype=bool)
        scores = pair_scores(tb.member_tables(members), dec).ravel()  # pair i = (i // Pm, i % Pm)
        open_pairs = np.flatnonzero(~fails.ravel())
        order = open_pairs[np.argsort(-scores[open_pairs], kind="stable")]
        t_load = time.perf_counter()
        threads = numba.get_num_threads()

        if not self._loaded:  # the process's first call loads the compiled kernels: not planning time
            none = np.zeros(0, dtype=np.int64)
            evaluate_on(none, none, 0, 1, False)
            start_threads(threads)  # the threads run_pairs uses
            self._loaded = True
        else:
            t_load = time.perf_counter()
        load_s = time.perf_counter() - t_load
        res = race(evaluate_on, pair_c, pair_m, order, P.M, P.halving_eta, P.delta, deadline + load_s, self._rates,
                   sim_limit=P.sim_limit)
        return res, load_s * 1000.0

    def _halving(self, evaluate, pair_c: np.ndarray, pair_m: np.ndarray) -> tuple[int, int, int]:
        """Successive halving over pairs (option): few samples for all, more for the best.

        Round r adds samples up to ``M / eta**(R-1-r)`` for the surviving pairs
        and keeps the best ``1/eta`` of them (ties to the earlier pair); the
        last round brings the survivors to M samples, so their scores are the
        same numbers a full evaluation would give them (same keys).
        """
        P = self.params
        R, eta = P.halving_rounds, P.halving_eta
        targets = sorted({max(1, P.M // eta ** (R - 1 - r)) for r in range(R)} | {P.M})
        alive = np.arange(len(pair_c))
        wins = np.zeros(len(pair_c), dtype=np.int64)
        done = 0
        n_sims = 0
        for r, target in enumerate(targets):
            wins[alive] += evaluate(pair_c[alive], pair_m[alive], done, target)
            n_sims += len(alive) * (target - done)
            done = target
            if r < len(targets) - 1:
                keep = max(1, math.ceil(len(alive) / eta))
                order = np.lexsort((alive, -wins[alive]))  # best first, ties to the earlier pair
                alive = np.sort(alive[order[:keep]])
        best = int(alive[np.argmax(wins[alive])])
        return best, int(wins[best]), n_sims


class SeqMemberPolicy(Policy):
    """Portfolio member Seq-(m, k) run on its own with the atomic launch (tests, comparisons)."""

    def __init__(self, model: int, k: int) -> None:
        self.model, self.k = int(model), int(k)
        self.name = f"seq_atomic_{model}_{k}"

    def model_positions(self, arr: DagArrays) -> np.ndarray:
        return np.array([self.model], dtype=np.int64)

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        pass

    def act(self, view: DecisionView):
        if not view.arr.available[view.ready, self.model].all():
            return None
        n = view.arr.n
        return np.full(n, self.model, dtype=np.int64), np.full(n, self.k, dtype=np.int64)

    def episode_diagnostics(self) -> dict:
        return {}


class FirstActionThenMember(SeqMemberPolicy):
    """Play a fixed first action, then member Seq-(m, k): what MCPP's estimate is about."""

    def __init__(self, act_model: np.ndarray, act_count: np.ndarray, model: int, k: int) -> None:
        super().__init__(model, k)
        self.first = (np.asarray(act_model, dtype=np.int64), np.asarray(act_count, dtype=np.int64))
        self._started = False

    def reset(self, arr: DagArrays, seed: int, dag: int, trial: int) -> None:
        self._started = False

    def act(self, view: DecisionView):
        if not self._started:
            self._started = True
            return self.first
        return super().act(view)


def make_mcpp_policy(params: Mapping[str, Any], planning_arr: DagArrays | None) -> MCPortfolioPolicy:
    """The registry's factory for MCPP: ``params`` as for :class:`MCPortfolioPolicy`."""
    return MCPortfolioPolicy(params, planning_arr)


def check_mcpp_params(params: Mapping[str, Any], where: str) -> None:
    """Refuse bad MCPP parameters of a variant (``mc_portfolio_rollout[M=0]``) before any work."""
    try:
        resolve_params(params)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def check_mcpp_dag(params: Mapping[str, Any], dag: Any, arr: DagArrays) -> None:
    """Refuse a DAG on which none of the portfolio's ``model_ids`` exists (the planner's own rule)."""
    if not params.get("model_ids"):
        return
    policy = MCPortfolioPolicy(params)
    policy.dag_model_ids = dag.model_ids
    try:
        policy.model_positions(arr)
    except ConfigError as exc:
        raise ConfigError(f"MC_PORTFOLIO_MODEL_IDS: {exc}") from None


#: the registry entry of MCPP (listed in simulator.methods)
METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(
        MCPP, PYTHON_POLICY, ATOMIC, HARD, baseline=False, family="mcpp", sets=("all", "mcpp", "loader_only"),
        factory=make_mcpp_policy, settings_key="mcpp", check_params=check_mcpp_params, check_dag=check_mcpp_dag,
        launch_param="launch_rule", label="MCPP", aliases=("MCPP",), display_label="MCPP",
        variant_words={
            "crn": ("evaluation", "crn"),
            "halving": ("evaluation", "halving"),
            "crn_halving": ("evaluation", "crn_halving"),
            "corrected": ("candidate_generator", "corrected"),
            "reuse": ("reuse", "state"),
        },
        description="Monte Carlo Portfolio Planning",
    ),
)
