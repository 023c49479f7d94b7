"""Closed-loop agreement: N live episodes against the loopback world vs N simulated ones.

Both sides run the same DAG, budget, deadline (model seconds; the live
deadline is ``deadline x scale`` wall seconds on a clock that stops while a
planner runs, so planner time costs no model time, as in the simulator) and
method. The world draws every attempt with the simulator's keyed draw; by
default it uses seed ``seed + 1`` so the two samples are independent (the
standard errors are those of two independent means); ``world_seed = seed``
makes them share their luck. ``agree`` passes when both differences (on-time
rate, mean spend) are within ``z`` (3) standard errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from executor.clock import Clock, VirtualClock
from executor.live import LiveRun, Options, RunResult, RunSpec, Workflow, open_run
from executor.trace import Trace
from executor.trace import drain as drain_traces
from executor.world import World
from simulator.engine.episode import Policy, run_policy_episode
from simulator.engine.loop import REASONS
from simulator.engine.registry import LIVE, execution_of
from simulator.methods import method_spec
from simulator.simulate import SimSpec, policy_for, simulate_run

#: longest wall time the start barrier waits for the first wave's requests to reach the world
START_BARRIER_MAX_S = 10.0
HTTP_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=256)
_SSL = httpx.create_ssl_context()


def http_client() -> httpx.AsyncClient:
    """An HTTP client for one run (its own connection pool; the TLS context is shared).

    httpx's pool scans all its connections for every request, so one pool
    shared by hundreds of concurrent runs costs time quadratic in the
    connections (measured: the event loop fell seconds behind with 400
    requests in flight); a pool per run keeps each scan to that run's requests.
    """
    return httpx.AsyncClient(limits=HTTP_LIMITS, trust_env=False, verify=_SSL)


@dataclass
class Side:
    on_time: np.ndarray
    spend: np.ndarray
    terminations: list[str] | None = None  # per trial (paired comparisons)

    @property
    def n(self) -> int:
        return len(self.on_time)

    def rate(self) -> tuple[float, float]:
        p = float(self.on_time.mean())
        return p, math.sqrt(max(p * (1 - p), 0.0) / self.n)

    def mean_spend(self) -> tuple[float, float]:
        return float(self.spend.mean()), float(self.spend.std(ddof=1) / math.sqrt(self.n)) if self.n > 1 else 0.0


def compare(live: Side, sim: Side, z: float = 3.0) -> dict[str, Any]:
    """Both on-time rates, both mean spends, the differences with their standard errors, and the verdict."""
    out: dict[str, Any] = {"n_live": live.n, "n_sim": sim.n, "z": z}
    ok = True
    for name, f in (("on_time", Side.rate), ("spend", Side.mean_spend)):
        (a, sa), (b, sb) = f(live), f(sim)
        se = math.sqrt(sa * sa + sb * sb)
        if se == 0.0 and name == "on_time":  # both rates 0 or 1: the binomial SE of the pooled rate
            pooled = (a * live.n + b * sim.n) / (live.n + sim.n)
            se = math.sqrt(max(pooled * (1 - pooled), 0.0) * (1 / live.n + 1 / sim.n))
        diff = a - b
        passed = abs(diff) <= z * se if se > 0 else diff == 0.0
        ok &= passed
        out[name] = {"live": a, "live_se": sa, "sim": b, "sim_se": sb, "diff": diff, "se": se,
                     "z_score": (diff / se) if se > 0 else 0.0, "pass": passed}
    out["pass"] = ok
    return out


def simulated_side(wf: Workflow, method: str, budget: float, deadline: float, runs: int, seed: int,
                   params: Mapping[str, Any] | None) -> Side:
    """N simulated episodes of ``method`` under the ``live`` execution rules (the rules the live run follows)."""
    spec = SimSpec(budget=budget, deadline=deadline, trials=list(range(runs)), seed=seed, dag=wf.dag_row, rules=LIVE)
    batch = simulate_run(wf.arr, method, spec, params=params, model_names=wf.stats.model_ids)
    on_time, reason, _ = batch.scored(deadline)
    return Side(np.asarray(on_time, dtype=bool), np.asarray(batch.total_cost, dtype=float),
                [REASONS[int(c)] for c in reason])


class Forwarding(Policy):
    """A policy forwarding every call to ``inner``: subclass it to change one call (a log, a key)."""

    def __init__(self, inner: Policy) -> None:
        self.inner, self.name, self.legacy_only = inner, inner.name, inner.legacy_only

    def model_positions(self, arr):
        return self.inner.model_positions(arr)

    def budget_caps(self, arr, b):
        return self.inner.budget_caps(arr, b)

    def reset(self, arr, seed, dag, trial):
        self.inner.reset(arr, seed, dag, trial)

    def act(self, view):
        return self.inner.act(view)


def simulated_decisions(wf: Workflow, method: str, budget: float, deadline: float, seed: int,
                        params: Mapping[str, Any] | None, trial: int) -> list[tuple]:
    """The decisions of simulated trial ``trial`` under the live rules, as a live run logs them."""
    policy, rule = policy_for(method, params, None, wf.stats.model_ids, execution_of(method_spec(method), LIVE).launch)
    log: list[tuple] = []
    ids, models = [int(x) for x in wf.stats.node_ids], wf.stats.model_ids

    class Logged(Forwarding):
        def act(self, view):
            a = policy.act(view)
            act = {} if a is None else {ids[v]: [models[int(a[0][v])], int(a[1][v])] for v in view.ready
                                        if int(a[1][v]) > 0 and int(a[0][v]) >= 0}
            log.append((round(view.t, 6), [ids[v] for v in view.ready], act))
            return a

    run_policy_episode(wf.arr, Logged(policy), budget, deadline, seed, wf.dag_row, trial, launch=rule)
    return log


def parting(wf: Workflow, method: str, budget: float, deadline: float, seed: int, params: Mapping[str, Any] | None,
            trial: int, live_log: list[tuple]) -> str:
    """Where a live trial and its simulated twin part: the first decision that differs, in words."""
    sim_log = simulated_decisions(wf, method, budget, deadline, seed, params, trial)
    for i, (a, b) in enumerate(zip(live_log, sim_log)):
        if a[0] != b[0] or a[1] != b[1] or {int(k): v for k, v in a[2].items()} != b[2]:
            return (f"decision {i}: live at t={a[0]:g} ready {a[1]} launched {a[2]}; "
                    f"simulated at t={b[0]:g} ready {b[1]} launched {b[2]}")
    if len(live_log) != len(sim_log):
        return f"the same first {min(len(live_log), len(sim_log))} decisions, then live made {len(live_log)} " \
               f"and the simulation {len(sim_log)}"
    return f"the same {len(live_log)} decisions; they part on an answer (a verdict, a cut or a deadline tie)"


def paired(live: Side, sim: Side, limit: int = 10) -> dict[str, Any]:
    """Trial by trial (the world drawing from the simulated trial's key): how many end the same way.

    A trial is identical when its on-time outcome and its termination agree;
    the first differing trials are listed with both ends. ``same_spend``
    counts the trials whose spends also agree to 0.1% (in the money cost
    mode the simulator may reserve a fraction of one token's price that a
    live ``max_tokens`` cannot: a cut answer is charged whole tokens live).
    """
    same = [bool(a == b and ta == tb) for a, b, ta, tb in zip(live.on_time, sim.on_time, live.terminations or [],
                                                              sim.terminations or [], strict=True)]
    differ = [{"trial": t, "live": [bool(live.on_time[t]), live.terminations[t]],
               "simulated": [bool(sim.on_time[t]), sim.terminations[t]]} for t, s in enumerate(same) if not s]
    spend = np.isclose(live.spend, sim.spend, rtol=1e-3, atol=0.0)
    return {"identical": int(sum(same)), "n": len(same), "same_spend": int(np.sum(spend & np.asarray(same))),
            "first_differing": differ[:limit]}


def _feed(h: Any, obj: Any) -> None:
    """Feed ``obj``'s content to ``h``: arrays by their bytes, dataclasses, mappings and sequences member by member,
    anything else by its repr (an object whose repr is its address makes the digest random: never a false match)."""
    if isinstance(obj, np.ndarray):
        h.update(f"A{obj.dtype}{obj.shape}".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(type(obj).__name__.encode())
        for f in dataclasses.fields(obj):
            h.update(f.name.encode())
            _feed(h, getattr(obj, f.name))
    elif isinstance(obj, Mapping):
        h.update(b"M%d" % len(obj))
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode())
            _feed(h, obj[k])
    elif isinstance(obj, list | tuple):
        h.update(b"L%d" % len(obj))
        for x in obj:
            _feed(h, x)
    else:
        h.update(repr(obj).encode())
        h.update(b"\0")


def loopback_trace_ids(inputs: Mapping[str, Any], runs: int) -> list[str]:
    """The trace ids of ``runs`` loopback runs on the virtual clock, keyed by everything the runs are a function of
    (``inputs``: the workflow and its planner arrays, the world's pool line, the method, limits, seeds, options,
    faults, concurrency, ...) and the trial. Such a run is reproducible (the world draws keyed rows and model time
    moves only when nothing else can), so its identity is too: a pool learned from its traces imputes the same rows
    on every rerun (the imputation of a censored request is keyed by its trace id), and the same run's trace met
    twice is counted once, as it should be, while runs of other inputs never share an id."""
    h = hashlib.sha256(b"loopback-trace/1")
    _feed(h, inputs)
    h.update(b"runs%d" % runs)
    return [hashlib.sha256(h.digest() + b"trial%d" % t).hexdigest()[:32] for t in range(runs)]


async def live_episodes(wf: Workflow, pool, method: str, budget: float, deadline: float, runs: int, *,
                        scale: float, seed: int, world_seed: int, params: Mapping[str, Any] | None = None,
                        concurrency: int = 200, options: Options | None = None, trace_dir: str | None = None,
                        faults=None, usage: str = "sampled", pausable: bool = True, virtual: bool = True,
                        ) -> tuple[list[RunResult], World]:
    """N live runs (at most ``concurrency`` at once) against an in-process loopback world on 127.0.0.1."""
    clock = VirtualClock(scale) if (virtual and pausable) else Clock(scale, pausable=pausable)
    trace_ids: Sequence[str | None] = [None] * runs  # on a wall clock a run is not reproducible: random ids
    if isinstance(clock, VirtualClock):
        trace_ids = loopback_trace_ids(
            {"workflow": wf, "world_line": pool.raw(wf.dag_row), "method": method, "budget": budget,
             "deadline": deadline, "scale": scale, "seed": seed, "world_seed": world_seed, "params": params,
             "concurrency": concurrency, "options": options, "faults": faults, "usage": usage}, runs)
    world = World(pool, seed=world_seed, clock=clock, faults=faults, usage=usage,
                  tasks={wf.dag_row: wf.tasks})
    await world.start()
    endpoints = {e.model_id: e for e in world.endpoints()}
    limits = {m: asyncio.Semaphore(ep.concurrency) for m, ep in endpoints.items()}
    gate = asyncio.Semaphore(concurrency)
    first_wave: list[LiveRun] = []
    try:
        async def one(trial: int) -> RunResult:
            async with gate, http_client() as http:  # one connection pool per run (see http_client)
                path = str(Path(trace_dir) / f"trial_{trial:05d}.jsonl") if trace_dir else None
                trace = Trace(path, fsync=(options or Options()).fsync, trace_id=trace_ids[trial])
                try:
                    spec = RunSpec(budget=budget, deadline=deadline, seed=seed, trial=trial)
                    async with open_run(wf, endpoints, method, spec, http=http, clock=clock, trace=trace,
                                        params=params, options=options, limits=limits) as run:
                        if trial < concurrency:
                            first_wave.append(run)
                        return await run.run()
                finally:
                    trace.close(wait=False)  # fsynced and closed by the fsync thread: no disk wait in the loop

        with clock.paused():  # the start barrier (docs/executor.md): model time 0 once the first wave is on the wire
            tasks = [asyncio.ensure_future(one(t)) for t in range(runs)]
            n_first = min(runs, concurrency)
            t_limit = clock.wall() + START_BARRIER_MAX_S
            while clock.wall() < t_limit:
                if len(first_wave) == n_first and all(r.launched.is_set() for r in first_wave) \
                        and world.stats.requests >= sum(r.samples_started for r in first_wave):
                    break
                await asyncio.sleep(0.002)
        results = await asyncio.gather(*tasks)
    finally:
        await world.stop()
        await asyncio.to_thread(drain_traces)
    return list(results), world


def agree(wf: Workflow, pool, method: str, budget: float, deadline: float, runs: int, *, scale: float, seed: int,
          world_seed: int | None = None, params: Mapping[str, Any] | None = None, concurrency: int = 200,
          z: float = 3.0, options: Options | None = None) -> dict[str, Any]:
    """Run both sides and compare them (the report ``python -m executor agree`` prints)."""
    ws = seed + 1 if world_seed is None else world_seed
    results, world = asyncio.run(live_episodes(wf, pool, method, budget, deadline, runs, scale=scale, seed=seed,
                                               world_seed=ws, params=params, concurrency=concurrency,
                                               options=options))
    endpoints = {e.model_id: e for e in world.endpoints()}
    billed = np.array([world_bill(world, wf, t, endpoints) for t in range(runs)])
    # the live run's spend by the executor's billing rule (settled + possibly billed), as the live rules charge
    account = np.array([r.spent + r.unbilled for r in results])
    live = Side(np.array([r.on_time for r in results]), account, [r.termination for r in results])
    sim = simulated_side(wf, method, budget, deadline, runs, seed, params)
    out = compare(live, sim, z)
    if ws == seed:  # the same draws on both sides: compare trial by trial
        out["paired"] = paired(live, sim)
        for d in out["paired"]["first_differing"]:
            d["parts_at"] = parting(wf, method, budget, deadline, seed, params, d["trial"],
                                    results[d["trial"]].decisions)
    ledger = np.array([r.spent for r in results])
    out["ledger_spent"] = {"live": float(ledger.mean()), "live_se": float(ledger.std(ddof=1) / math.sqrt(runs)),
                           "unbilled_mean": float(np.mean([r.unbilled for r in results])),
                           "world_billed": float(billed.mean())}
    terms: dict[str, int] = {}
    for r in results:
        terms[r.termination] = terms.get(r.termination, 0) + 1
    out.update(method=method, problem_id=wf.stats.problem_id, dag=wf.dag_row, budget=budget, deadline=deadline,
               time_scale=scale, seed=seed, world_seed=ws, live_terminations=terms,
               live_wall_s_max=max(r.wall_s for r in results), world_requests=world.stats.requests,
               planner_ms_mean=float(np.mean([r.planner_ms for r in results])))
    return out


def world_bill(world: World, wf: Workflow, trial: int, endpoints) -> float:
    """What the world billed one live run, in the run's cost unit (the simulator charges at launch too)."""
    total = 0.0
    for m in wf.stats.model_ids:
        tokens = world.bills.get((wf.dag_row, trial, m), 0)
        ep = endpoints.get(m)
        if tokens and ep is not None:
            total += tokens if wf.cost_mode == "token_cost_mean" else tokens * (ep.output_price_per_1m / 1e6)
    return total


def format_agreement(r: dict[str, Any]) -> str:
    lines = [f"agree: {r['method']} on {r['problem_id']} (DAG {r['dag']}), budget {r['budget']:.6g}, "
             f"deadline {r['deadline']:.6g} s, {r['n_live']} live + {r['n_sim']} simulated episodes, "
             f"time scale {r['time_scale']:g}",
             f"{'':10s} {'live':>12s} {'simulated':>12s} {'diff':>10s} {'SE':>9s} {'z':>6s}"]
    for name in ("on_time", "spend"):
        s = r[name]
        lines.append(f"{name:10s} {s['live']:12.4f} {s['sim']:12.4f} {s['diff']:10.4f} {s['se']:9.4f} "
                     f"{s['z_score']:6.2f} {'ok' if s['pass'] else 'DIFFERENT'}")
    led = r["ledger_spent"]
    lines.append(f"spend: the executor's account (settled + possibly billed, the live rules' charge): settled "
                 f"{led['live']:.4f} +- {led['live_se']:.4f}, possibly billed (cancelled) {led['unbilled_mean']:.4f}; "
                 f"the world billed {led['world_billed']:.4f}")
    lines.append(f"live terminations: {r['live_terminations']}")
    if "paired" in r:
        p = r["paired"]
        lines.append(f"paired: {p['identical']} of {p['n']} trials identical (same on-time outcome and termination)"
                     f"; {p['same_spend']} of them also spend the same (to 0.1%)")
        for d in p["first_differing"]:
            lines.append(f"  trial {d['trial']}: live on_time={d['live'][0]} {d['live'][1]}, "
                         f"simulated on_time={d['simulated'][0]} {d['simulated'][1]}; parts at "
                         f"{d.get('parts_at', '?')}")
    lines.append("PASS" if r["pass"] else f"FAIL: a difference exceeds {r['z']:g} SE")
    return "\n".join(lines)
