"""Exploring a workflow within a hard budget: every (node, model) pair the endpoints offer, towards N observations.

``python -m executor explore --workflow W --endpoints E --budget B --trace-dir DIR [--per-pair N] [--deadline D]``
runs the workflow again and again (``run``'s machinery: :class:`executor.live.LiveRun`, its ledger, retries,
deadline and trace) with an exploring policy instead of a planner, until every pair has N observations
or the budget cannot pay another request. Each run's trace goes to ``DIR/run_<k>.jsonl``; they are the
input of ``python -m poolbuild.from_traces`` (``docs/workflows.md``).

**Which pair next.** At each decision of a run, each ready node gets one sample of its *least observed*
model (observations counted over every trace in DIR and every sample launched since; ties broken by a
keyed draw of (seed, run, node, decision)). Why: a pool's statistics are estimated per pair, and with a
fixed number of samples the largest standard error over pairs is smallest when the counts are equal, so
the rule fills the emptiest pair first; it never looks at outcomes, so how often a pair is sampled does
not depend on its results (the estimates stay unbiased). A child is asked only once its parents have
passed (it is sent their accepted answers, as in a real run), so a node is sampled until it passes in
that run; its siblings in the DAG are sampled in the same run. A pair already at N is still sampled
when its node must pass and every model of the node is at N (the least observed again).

**Budget, hard.** ``--budget`` is the cap on the exploration's whole bill, across every rerun of the
command: what earlier runs spent (their traces' ``spent + unbilled``; for a trace cut off without its end
event, everything its last ledger held) is taken off first, and each run has its own hard ledger whose
budget is its share of what is left, so the shares never sum past it. A request reserves its worst case
(``max_tokens``) before it is sent, as in ``run``.

**Resumable.** A rerun of the same command reads DIR, counts what is there and goes on with the next run
number; ``DIR/explore.json`` records the workflow's hash and the cost mode, and a rerun with another
workflow or cost mode is refused (one line, exit 2).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from executor.agree import http_client
from executor.clock import Clock
from executor.endpoints import Endpoint, check_keys, load_endpoints
from executor.inputs import live_cost_mode, make_workflow
from executor.live import Options, RunSpec, Workflow, open_run
from executor.trace import Trace, read_trace, summarize
from executor.workflow import WorkflowFile, load_workflow
from poolbuild.from_traces import collect
from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_json
from simulator.base.outputs import check_output_path
from simulator.costs.limits import ABSOLUTE, BUDGET, DEADLINE, WALL_SECONDS, Limit
from simulator.engine.episode import Policy
from simulator.pools.pool import pool_from_objects

STATE = "explore.json"
RUN_NAME = re.compile(r"run_(\d+)\.jsonl$")
DEFAULT_PER_PAIR = 30
#: wall seconds a run may take (its deadline) when --deadline is not given
DEFAULT_RUN_DEADLINE_S = 3600.0


def placeholder_line(wf: WorkflowFile, endpoints: Mapping[str, Endpoint]) -> dict[str, Any]:
    """A pool line of the workflow with no knowledge: every model on every node, success 1/2, an answer of
    ``max_tokens`` (the largest charge, so a sample's cap is the endpoint's own and nothing is cut by it)."""
    kids = wf.children()
    models = list(endpoints)
    nodes = []
    for v in wf.node_ids:
        tm = {}
        for m in models:
            ep = endpoints[m]
            tm[m] = {"success_prob": 0.5, "lat_mean": max(ep.request_timeout_s / 2.0, 1e-3), "lat_std": 0.0,
                     "cost_mean": float(ep.max_tokens), "token_cost_mean": float(ep.max_tokens)}
        nodes.append({"node_id": v, "name": wf.names[v], "parents": list(wf.parents[v]), "children": kids[v],
                      "model_templates": tm, "legacy_template_model": models[0]})
    return {"problem_id": wf.name, "dag_kind": "explore_placeholder", "model_ids": models, "nodes": nodes}


class ExplorePolicy(Policy):
    """One sample of the least observed model per ready node (module docstring); shares ``counts`` across runs."""

    name = "explore"

    def __init__(self, counts: np.ndarray, seed: int) -> None:
        self.counts = counts
        self.seed = seed
        self.trial = 0

    def reset(self, arr, seed: int, dag: int, trial: int) -> None:
        self.trial = trial

    def act(self, view) -> tuple[np.ndarray, np.ndarray]:
        n, m = self.counts.shape
        models = np.full(n, -1, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        avail = view.arr.available  # the run's view: refused pairs and models down are out
        for v in view.ready:
            allowed = [j for j in range(m) if avail[v, j]]
            if not allowed:
                continue
            fits = [j for j in allowed if view.arr.kappa[v, j] <= view.budget_left]
            allowed = fits or allowed  # a pair the run's budget cannot pay is not chosen while another fits
            lo = min(self.counts[v, j] for j in allowed)
            tied = [j for j in allowed if self.counts[v, j] == lo]
            j = tied[_keyed_index(self.seed, self.trial, int(v), view.decision_index, len(tied))]
            models[v], counts[v] = j, 1
            self.counts[v, j] += 1
        return models, counts


def _keyed_index(seed: int, trial: int, v: int, decision: int, k: int) -> int:
    """A keyed choice among ``k`` tied pairs: (seed, run, node, decision) decide it, not the order of events."""
    d = hashlib.sha256(f"{seed}|{trial}|{v}|{decision}".encode()).digest()
    return int.from_bytes(d[:8], "big") % k


@dataclass
class Progress:
    """What DIR holds: observations per pair, money spent (or possibly billed), the next run number."""

    counts: np.ndarray
    spent: float
    next_run: int
    runs: int
    notes: list[str] = field(default_factory=list)


def survey(trace_dir: Path, wf: WorkflowFile, models: Sequence[str]) -> Progress:
    """Count what the traces in ``trace_dir`` hold (refused: a trace of another workflow)."""
    files = sorted(p for p in trace_dir.glob("run_*.jsonl") if RUN_NAME.search(p.name))
    notes: list[str] = []
    c = collect(files, wf.hash, notes.append)
    index = {v: i for i, v in enumerate(wf.node_ids)}
    counts = np.zeros((len(wf.node_ids), len(models)), dtype=np.int64)
    for o in c.obs:
        if o.node in index and o.model in models:
            counts[index[o.node], models.index(o.model)] += 1
    spent = 0.0
    for f in files:
        s = summarize(*read_trace(f))
        spent += float(s.get("may_have_been_billed", (s.get("spent") or 0.0) + (s.get("unbilled") or 0.0)))
    nums = [int(RUN_NAME.search(f.name).group(1)) for f in files]
    return Progress(counts, spent, (max(nums) + 1) if nums else 0, len(files), notes)


def _state(trace_dir: Path, wf: WorkflowFile, cost_mode: str, budget: float, models: Sequence[str]) -> list[str]:
    """Check (or write) ``explore.json``: the same workflow and cost mode as the runs already there."""
    path = trace_dir / STATE
    lines: list[str] = []
    if path.is_file():
        import json

        try:
            st = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ConfigError(f"{path}: not the explore state file (not JSON)") from None
        if st.get("workflow_hash") != wf.hash:
            raise ConfigError(f"{path}: workflow_hash: this folder explores {st.get('workflow_hash')!r}, not "
                              f"{wf.hash!r} ({wf.path}); use another --trace-dir")
        if st.get("cost_mode") != cost_mode:
            raise ConfigError(f"{path}: cost_mode: this folder's budget is in {st.get('cost_mode')!r}, not "
                              f"{cost_mode!r}")
        if st.get("budget") != budget:
            lines.append(f"explore: the budget is now {budget:.6g} (was {st.get('budget')}): the cap on the whole "
                         f"exploration, earlier runs included")
    atomic_write_json(path, {"workflow_hash": wf.hash, "workflow": wf.path, "cost_mode": cost_mode,
                             "budget": budget, "models": list(models)})
    return lines


async def explore(wf: WorkflowFile, workflow: Workflow, endpoints: Mapping[str, Endpoint], *, budget: float,
                  per_pair: int, trace_dir: Path, deadline: float, clock: Clock, concurrency: int = 1,
                  seed: int = 0, options: Options | None = None, say: Callable[[str], None] = print,
                  max_runs: int | None = None) -> Progress:
    """Runs until every pair has ``per_pair`` observations or the budget cannot pay a request (module docstring)."""
    models = list(workflow.stats.model_ids)
    prog = survey(trace_dir, wf, models)
    for note in prog.notes:
        say(note)
    counts = prog.counts.copy()
    policy = ExplorePolicy(counts, seed)
    kappa = np.asarray(workflow.arr.kappa, dtype=float)
    spent = prog.spent
    run_no = prog.next_run
    started = 0
    total = counts.size
    say(f"explore: {wf.name} ({len(wf.node_ids)} nodes x {len(models)} models), {int((prog.counts >= per_pair).sum())}"
        f" of {total} pairs at {per_pair}, spent {spent:.6g} of {budget:.6g} in {prog.runs} earlier runs")
    while True:
        if (prog.counts >= per_pair).all():
            say(f"explore: done: every pair has {per_pair} observations")
            break
        left = budget - spent
        short = prog.counts < per_pair
        need = float(kappa[short].min())  # the cheapest request of a pair still short of N
        k = max(1, min(concurrency, int(left // (2 * float(kappa[short].max())))))
        if left < need:
            say(f"explore: stopped: the budget left ({left:.6g}) cannot pay a request of a pair still short of "
                f"{per_pair} observations (the cheapest: {need:.6g})")
            break
        if max_runs is not None and started >= max_runs:
            say(f"explore: stopped after {started} runs (--max-runs)")
            break
        if max_runs is not None:
            k = min(k, max_runs - started)
        np.copyto(counts, prog.counts)  # what the traces hold now (launches counted since are re-counted)
        share = left / k

        async def one(no: int, share: float = share) -> None:
            path = trace_dir / f"run_{no:05d}.jsonl"
            trace = Trace(path)
            try:
                async with http_client() as http:
                    async with open_run(workflow, endpoints, "sequential", RunSpec(budget=share, deadline=deadline,
                                                                                    seed=seed, trial=no),
                                        http=http, clock=clock, trace=trace, options=options) as run:
                        _as_explorer(run, policy)
                        await run.run()
            finally:
                trace.close()

        await asyncio.gather(*(one(run_no + i) for i in range(k)))
        run_no += k
        started += k
        before = int(prog.counts.sum())
        prog = survey(trace_dir, wf, models)
        spent = prog.spent
        if int(prog.counts.sum()) == before:  # nothing observed in a whole round: what is short costs too much
            say(f"explore: stopped: {k} runs observed nothing (the budget left, {budget - spent:.6g}, cannot pay "
                f"the pairs still short of {per_pair}; a run's share was {share:.6g})")
            break
        say(f"explore: {prog.runs} runs, {int((prog.counts >= per_pair).sum())} of {total} pairs at {per_pair} "
            f"(fewest {int(prog.counts.min())}), spent {spent:.6g} of {budget:.6g}")
    return prog


def _as_explorer(run, policy: ExplorePolicy) -> None:
    """Give a :class:`~executor.live.LiveRun` the exploring policy: every model, per-attempt launches, no caps."""
    from simulator.engine.registry import LIVE_PER_ATTEMPT

    run.policy = policy
    run.method = "explore"
    policy.reset(run.wf.arr, run.seed, run.wf.dag_row, run.trial)
    run.launch_rule = LIVE_PER_ATTEMPT
    run.core.mask[:] = True  # the method's models, as the run's rules see them: every model
    run.core.legacy_only = False
    run.cap = np.full(run.n, np.inf)


def cmd_explore(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor explore",
                                 description="Sample every (node, model) pair of a workflow within a hard budget.")
    ap.add_argument("--workflow", type=cliargs.input_path(), required=True, metavar="W", help="workflow file (JSON, docs/workflows.md)")
    ap.add_argument("--endpoints", type=cliargs.input_path(), required=True, metavar="E", help="endpoints file (TOML): the models to explore")
    ap.add_argument("--budget", required=True, metavar="B",
                    help="hard cap on the whole exploration's bill (cost unit), earlier runs in DIR included")
    ap.add_argument("--trace-dir", type=cliargs.output_path("dir"), required=True, metavar="DIR", help="folder of the runs' traces (resumable)")
    ap.add_argument("--per-pair", type=int, default=DEFAULT_PER_PAIR, metavar="N",
                    help=f"observations to reach per (node, model) (default {DEFAULT_PER_PAIR})")
    ap.add_argument("--deadline", default=None, metavar="D",
                    help=f"wall seconds per run (default {DEFAULT_RUN_DEADLINE_S:g})")
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=1.0, help="wall seconds per model second")
    ap.add_argument("--cost-mode", default="token", help="token (output tokens) or money (dollars from the prices)")
    ap.add_argument("--concurrency", type=int, default=1, help="runs at once (each with its share of the budget)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the tie-breaking draws")
    ap.add_argument("--max-runs", type=int, default=None, help="stop after this many runs (this invocation)")
    args = ap.parse_args(argv)
    budget = Limit(BUDGET, args.budget).value  # absolute only: the cap on the whole bill
    if args.per_pair < 1 or args.concurrency < 1 or not (args.time_scale > 0) or \
            (args.max_runs is not None and args.max_runs < 1):
        raise ConfigError("--per-pair, --concurrency and --max-runs must be >= 1 and --time-scale > 0")
    deadline = Limit(DEADLINE, DEFAULT_RUN_DEADLINE_S if args.deadline is None else args.deadline, ABSOLUTE,
                     WALL_SECONDS, infinite=False)
    cost_mode = live_cost_mode(args.cost_mode)
    wf = load_workflow(args.workflow)
    eps = load_endpoints(args.endpoints)
    trace_dir = Path(args.trace_dir)
    if trace_dir.exists() and not trace_dir.is_dir():
        raise ConfigError(f"--trace-dir {args.trace_dir}: is a file, not a folder")
    for inp in (args.workflow, args.endpoints):
        check_output_path(trace_dir / STATE, inputs=[inp], flag="--trace-dir")
    pool = pool_from_objects([placeholder_line(wf, eps)], name=f"<explore {args.workflow}>")
    workflow = make_workflow(pool, 0, f"<explore {args.workflow}>", eps, args.endpoints, None, cost_mode,
                             workflow=wf)
    check_keys(eps, workflow.stats.model_ids, args.endpoints)
    trace_dir.mkdir(parents=True, exist_ok=True)
    for line in _state(trace_dir, wf, cost_mode, budget, workflow.stats.model_ids):
        print(line)
    asyncio.run(explore(wf, workflow, eps, budget=budget, per_pair=args.per_pair, trace_dir=trace_dir,
                               deadline=deadline.of_nominal(None, time_scale=args.time_scale), clock=Clock(args.time_scale),
                               concurrency=args.concurrency, seed=args.seed, options=Options(),
                               say=lambda s: print(s, flush=True), max_runs=args.max_runs))
    return 0


if __name__ == "__main__":
    sys.exit(cmd_explore(sys.argv[1:]))
