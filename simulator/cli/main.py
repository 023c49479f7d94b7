"""``python -m simulator``: one-off questions about a pool.

* ``validate --pool P``: check a pool, print a summary;
* ``simulate --pool P --dag I --budget B --deadline D --method M --trials N``:
  on-time completion probability with a 95% (Wilson) interval, mean cost and
  makespan (``--budget-ratio`` / ``--deadline-ratio`` use the nominal scales,
  ``--json`` prints one machine-readable object);
* ``plan`` / ``predict``: MCPP's first decision / completion-probability map
  (see ``simulator/cli/planner.py``).

Every user error is printed as one readable line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from simulator.base import cliargs
from simulator.base.errors import cli_entry
from simulator.base.io_utils import dumps_strict
from simulator.cli.args import (
    add_pool_arguments,
    check_common_args,
    check_mcpp_models,
    cost_setting_from_args,
    load_pool_and_dag,
)
from simulator.costs.arrays import CostSetting, DagArrays, dag_arrays
from simulator.costs.limits import MODEL_SECONDS, add_limit_arguments, resolve_limits
from simulator.costs.modes import cost_unit
from simulator.engine.registry import EXECUTION_RULES, Execution, MethodSpec, execution_of
from simulator.mcpp.params import add_mcpp_arguments, mcpp_params_from_args
from simulator.methods import METHOD_ORDER, method_label, method_spec
from simulator.pools.pool import Pool, load_pool

#: below this many trials `simulate` runs a baseline on one thread (see run_chunk)
PARALLEL_MIN_TRIALS = 2000


def cmd_validate(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m simulator validate", description="Check a DAG pool.")
    ap.add_argument("--pool", type=cliargs.input_path(), required=True, help="DAG pool JSONL")
    ap.add_argument("--index-file", type=cliargs.input_path(), default=None, help="optional index file selecting rows")
    args = ap.parse_args(argv)
    from simulator.pools.pool import load_index_file

    pool = load_pool(args.pool)
    if args.index_file:
        pool = pool.subset(load_index_file(args.index_file, len(pool)), source=args.index_file)
    sizes = np.array([d.n_nodes for d in pool])
    depths = np.array([d.depth() for d in pool])
    kinds: dict[str, int] = {}
    for d in pool:
        kinds[d.dag_kind] = kinds.get(d.dag_kind, 0) + 1
    print(f"{args.pool}: OK")
    print(f"  DAGs: {len(pool)}   nodes: {sizes.sum()} (min {sizes.min()}, median {int(np.median(sizes))}, "
          f"max {sizes.max()})   depth: min {depths.min()}, max {depths.max()}")
    print(f"  kinds: {', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))}")
    print(f"  models: {', '.join(pool.model_ids)}")
    for m in pool.model_ids:
        avail = tot = rows = 0
        for d in pool:
            if m in d.model_ids:
                j = d.model_ids.index(m)
                avail += int(d.available[:, j].sum())
                rows += sum(d.rows(v, j).stop - d.rows(v, j).start for v in range(d.n_nodes))
            tot += d.n_nodes
        print(f"    {m}: available on {avail}/{tot} nodes ({100.0 * avail / tot:.1f}%), {rows} empirical rows")
    return 0


class SimulateRun(NamedTuple):
    """A checked ``simulate`` command: what it runs (every input refused before any work starts)."""

    args: argparse.Namespace
    spec: MethodSpec
    ex: Execution
    pool: Pool
    i: int
    params: dict
    setting: CostSetting
    arr: DagArrays
    budget: float
    deadline: float


def _simulate(run: SimulateRun) -> dict:
    """Run the trials of ``simulate`` and return the result object it prints."""
    from simulator.engine.summary import summarize_trials
    from simulator.simulate import SimSpec, simulate_baseline, simulate_run

    args, spec, ex, pool, i, params, setting, arr, budget, deadline = run

    dag_key = pool[i].index
    if ex.compiled:
        # threads only for many trials: compiling the parallel runner costs more on a cold cache than it saves
        # on a few trials (results are keyed, so the same either way)
        parallel = args.trials >= PARALLEL_MIN_TRIALS

        def run_chunk(trials):
            return simulate_baseline(arr, args.method, budget, trials, args.seed, dag_key, parallel=parallel)

        summary = summarize_trials(run_chunk, args.trials, deadline)
    else:
        from tqdm import tqdm

        with tqdm(total=args.trials, desc=args.method, disable=args.json or None, file=sys.stderr) as bar:
            def run_chunk(trials):
                spec = SimSpec(budget=budget, deadline=deadline, trials=trials, seed=args.seed, dag=dag_key,
                               rules=args.execution_rules)
                return simulate_run(arr, args.method, spec, params=params, model_names=pool[i].model_ids,
                                    progress=bar.update)

            summary = summarize_trials(run_chunk, args.trials, deadline)
    stats = summary.result()
    return {
        "pool": args.pool,
        "dag": i,
        "problem_id": pool[i].problem_id,
        "method": args.method,
        "budget": budget,
        "deadline": deadline,
        "cost_mode": setting.cost_mode,
        "seed": args.seed,
        "execution_rules": args.execution_rules,
        **stats,
    }


def parse_simulate(argv: Sequence[str]) -> SimulateRun:
    """Parse and check a ``simulate`` command line (also the cold-start helper's, simulator/base/prewarm.py)."""
    ap = cliargs.ArgumentParser(
        prog="python -m simulator simulate",
        description="On-time completion probability of one method on one DAG.",
    )
    add_pool_arguments(ap)
    add_limit_arguments(ap, deadline_unit=MODEL_SECONDS)  # 'inf' allowed: no deadline
    ap.add_argument(
        "--method", default="sequential",
        help=f"one method: MCPP (also mcpp; recorded as mc_portfolio_rollout) or a baseline "
        f"({', '.join(m for m in METHOD_ORDER if m != 'mc_portfolio_rollout')}; more: `python -m simulator methods`), "
        "or a variant NAME[key=value,...] such as MCPP[crn]",
    )  # fmt: skip
    ap.add_argument("--trials", default="1000", help="episodes (an integer >= 1)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--execution-rules", default="published", choices=EXECUTION_RULES,
                    help="execution-rule mode (docs/semantics.md): each method its own launch rule, or all atomic, "
                    "or all per attempt")  # fmt: skip
    add_mcpp_arguments(ap)
    args = check_common_args(ap.parse_args(argv))
    spec = method_spec(args.method, "--method")
    args.method = spec.name  # MCPP / mcpp -> mc_portfolio_rollout: the name records and results keep
    ex = execution_of(spec, args.execution_rules)
    pool, i = load_pool_and_dag(args)
    params: dict = {}
    if spec.settings_key == "mcpp":
        params = mcpp_params_from_args(args)
        check_mcpp_models(spec.run_params(params), pool)
    elif spec.settings_key == "further":
        from simulator.baselines.further.variants import resolve_further_params

        params = resolve_further_params().to_json()  # DEADLINE_* / LOADER_* variables (docs/further_baselines.md)
    setting = cost_setting_from_args(args)
    arr = dag_arrays(pool, i, setting)
    where = f"{args.pool}: DAG {i} (problem {pool[i].problem_id!r}): "
    budget, deadline = resolve_limits(args, arr, where)
    return SimulateRun(args, spec, ex, pool, i, params, setting, arr, budget, deadline)


def cmd_simulate(argv: Sequence[str]) -> int:
    from simulator.base import prewarm
    from simulator.cli import prewarm_groups

    run = parse_simulate(argv)
    args, budget, deadline, pool, i = run.args, run.budget, run.deadline, run.pool, run.i
    with prewarm.attached(prewarm_groups.waited_kernels(prewarm_groups.group_of(run.spec, run.ex))):
        result = _simulate(run)
    lo, hi = result["ci95"]
    if args.json:
        print(dumps_strict(result))
    else:
        unit = cost_unit(run.setting.cost_mode)
        print(f"{method_label(args.method)} on DAG {i} ({pool[i].problem_id}), budget {budget:.6g} {unit}, "
              f"deadline {deadline:.4g} model seconds, {result['trials']} trials ({args.execution_rules} rules)")
        print(f"  on-time completion probability: {result['on_time_completion_probability']:.1%} "
              f"(95% interval {lo:.1%} - {hi:.1%})")
        print(f"  mean cost: {result['mean_cost']:.6g} {unit}   mean makespan: {result['mean_makespan']:.4g} model seconds")
        print(f"  termination: {result['termination']}")
    return 0


def cmd_prewarm(argv: Sequence[str]) -> int:
    """The cold-start helper of ``simulate ARGV`` (hidden; simulator/cli/prewarm_groups.py): compile, print nothing."""
    from simulator.cli.prewarm_groups import warm

    run = parse_simulate(argv)
    warm(run.args.method, run.spec, run.ex, run.params, run.pool[run.i].model_ids)
    return 0


def cmd_plan(argv: Sequence[str]) -> int:
    from simulator.cli.planner import plan_main  # lazy: a baseline run never imports the MCPP planner

    return plan_main(argv)


def cmd_predict(argv: Sequence[str]) -> int:
    from simulator.cli.planner import predict_main

    return predict_main(argv)


def cmd_calibrate(argv: Sequence[str]) -> int:
    from simulator.cli.calibrate import calibrate_main

    return calibrate_main(argv)


def cmd_methods(argv: Sequence[str]) -> int:
    """List the registered methods: how each runs and the method sets it belongs to."""
    ap = cliargs.ArgumentParser(prog="python -m simulator methods", description=cmd_methods.__doc__)
    ap.add_argument("--json", action="store_true", help="print one JSON list")
    args = ap.parse_args(argv)
    from simulator.methods import REGISTRY

    rows = [
        {"method": s.name, "kind": s.kind, "launch": s.launch, "deadline": s.deadline, "baseline": s.baseline,
         "sets": list(s.sets), "variant_words": sorted(s.variant_words)}
        for s in (REGISTRY.get(n) for n in REGISTRY.names())
    ]  # fmt: skip
    if args.json:
        print(dumps_strict(rows))
        return 0
    print(f"{'method':32} {'kind':18} {'launch':12} {'deadline':9} {'baseline':9} sets")
    for r in rows:
        print(f"{r['method']:32} {r['kind']:18} {r['launch']:12} {r['deadline']:9} {str(r['baseline']):9} "
              f"{','.join(r['sets'])}")
    print("variants: NAME[key=value,...]; words: "
          + "; ".join(f"{r['method']}: {', '.join(r['variant_words'])}" for r in rows if r["variant_words"]))
    return 0


#: what ``python -m simulator --help`` prints (plain text: no markup, no source files)
HELP = """\
One-off questions about a DAG pool.

commands:
  validate   check a pool and summarise it (DAGs, nodes, depth, models)
               python -m simulator validate --pool P
  simulate   on-time completion probability of one method on one DAG, with a 95% (Wilson)
             interval, the mean cost and makespan (--json: one machine-readable object)
               python -m simulator simulate --pool P --dag I --budget B --deadline D --method MCPP
             (--budget-ratio / --deadline-ratio: multiples of the DAG's nominal budget and deadline)
  plan       MCPP's first decision on one DAG and its estimate
  predict    MCPP's completion probability over a (budget, deadline) grid of one DAG
  calibrate  MCPP's first-decision estimates against the on-time rate realized (reliability, ECE)
  methods    the methods (MCPP and the baselines), how each runs, and the method sets

`python -m simulator COMMAND --help` describes a command's options. Every user error is one
readable line on stderr with exit code 2. Terms and units: docs/problem.md."""

COMMANDS = {"methods": cmd_methods, "validate": cmd_validate, "simulate": cmd_simulate, "plan": cmd_plan,
            "predict": cmd_predict, "calibrate": cmd_calibrate}
#: commands not listed in the usage (``_prewarm``: the cold-start helper ``simulate`` starts)
HIDDEN = {"_prewarm": cmd_prewarm}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = COMMANDS
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m simulator {" + ",".join(commands) + "} [options]\n")
        print(HELP)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in commands and cmd not in HIDDEN:
        print(f"error: unknown command {cmd!r}; choose one of {', '.join(commands)}", file=sys.stderr)
        return 2
    return cli_entry(commands.get(cmd) or HIDDEN[cmd])(rest)
