"""``python -m executor``: ``run``, ``world``, ``demo``, ``agree``, ``summary`` (docs/executor.md).

Every input is checked before any request (one line naming the file and the
item, exit 2, :func:`simulator.base.errors.cli_entry`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from executor.agree import agree, format_agreement, http_client, live_episodes
from executor.clock import Clock
from executor.endpoints import check_keys, load_endpoints
from executor.inputs import (
    check_method,
    check_trace_path,
    live_cost_mode,
    load_dag,
    make_workflow,
)
from executor.live import EXIT_CODES, Options, RunSpec, open_run
from executor.redact import redact
from executor.trace import Trace, format_summary, read_trace, summarize
from executor.world import Faults, World, serve_until_stopped, stats_dict
from simulator.base import cliargs
from simulator.base.errors import ConfigError, cli_entry
from simulator.base.outputs import check_output_path
from simulator.base.settings import check_seed
from simulator.costs.limits import (
    MODEL_SECONDS,
    WALL_SECONDS,
    Limits,
    add_limit_arguments,
    limits_from_args,
    resolve_limits,
)
from simulator.mcpp.params import MCPP, add_mcpp_arguments, mcpp_params_from_args, resolve_params

EXAMPLE_POOL = Path(__file__).resolve().parent.parent / "examples" / "example_pool.jsonl"


def _common(ap: argparse.ArgumentParser, *, endpoints: bool, deadline_unit: str) -> None:
    """The flags of ``run`` and ``agree``; ``--deadline`` is in ``deadline_unit`` (wall seconds in ``run``, whose
    clock is the wall's; model seconds in ``agree``, whose deadline is the simulator's), which its help says."""
    ap.add_argument("--pool", type=cliargs.input_path(), required=True, help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    ap.add_argument("--tasks", type=cliargs.input_path(), default=None, help="tasks file (JSON); default: the loopback generic task per node")
    if endpoints:
        ap.add_argument("--endpoints", type=cliargs.input_path(), required=True, help="endpoints file (TOML)")
    add_limit_arguments(ap, deadline_unit=deadline_unit, infinite_deadline=False,
                        budget_unit="the cost unit (tokens, or dollars in money mode)")
    ap.add_argument("--method", default=MCPP, help="a registered method (mc_portfolio_rollout, sequential, uniform, ...)")
    ap.add_argument("--cost-mode", default="token", help="token (output tokens) or money (dollars from the prices)")
    ap.add_argument("--seed", default="0", help="run seed (planner keys; the world's draws in agree: seed + 1)")
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=1.0, help="wall seconds per model second")
    ap.add_argument("--cancel-siblings", action="store_true",
                    help="cancel a batch's other samples once one passes (departs from the simulated rules)")
    ap.add_argument("--update", choices=("off", "posterior"), default="off",
                    help="online re-estimation of the planner's statistics (off: the paper's behaviour)")
    ap.add_argument("--prior-strength", type=cliargs.number(0), default=8.0, help="pseudo-observations of the pool's prior")
    ap.add_argument("--calibrated-estimate", type=int, default=0, metavar="N",
                    help="a planner's plan events also report the calibrated estimate: the on-time rate of N "
                         "simulated episodes of the method from the run's state (costs N episodes per decision)")
    add_mcpp_arguments(ap)


def _options(args) -> Options:
    if not (args.prior_strength > 0):
        raise ConfigError(f"--prior-strength must be > 0, got {args.prior_strength}")
    if getattr(args, "calibrated_estimate", 0) < 0:
        raise ConfigError(f"--calibrated-estimate must be >= 0, got {args.calibrated_estimate}")
    return Options(cancel_siblings=args.cancel_siblings, update=args.update, prior_strength=args.prior_strength,
                   calibrated_episodes=getattr(args, "calibrated_estimate", 0))


def _run_options(args) -> Options:
    """``run``: also plan once before the deadline's clock starts (kernel compilation is not the run's time)."""
    opt = _options(args)
    opt.warm_up = True
    return opt


def _checked(args, *, endpoints: bool):
    """(pool, workflow, endpoints, params) with every input checked."""
    if not (args.time_scale > 0):
        raise ConfigError(f"--time-scale must be > 0, got {args.time_scale}")
    args.seed = check_seed(args.seed, "--seed", "flag")
    limits_from_args(args)  # a bad budget or deadline: refused before anything is read
    check_method(args.method)
    cost_mode = live_cost_mode(args.cost_mode)
    params = mcpp_params_from_args(args)
    resolve_params(params)  # refuses bad MCPP parameters
    eps = load_endpoints(args.endpoints) if endpoints else None
    pool, dag = load_dag(args.pool, args.dag)
    wfile = None
    if getattr(args, "workflow", None):  # tasks, node names and hash from a workflow file (docs/workflows.md)
        from executor.workflow import load_workflow

        if args.tasks:
            raise ConfigError("--workflow carries the tasks: give --workflow or --tasks, not both")
        wfile = load_workflow(args.workflow)
    wf = make_workflow(pool, dag, args.pool, eps, getattr(args, "endpoints", ""), args.tasks, cost_mode, wfile)
    return pool, wf, eps, params


def cmd_run(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor run", description="Run a workflow live.")
    _common(ap, endpoints=True, deadline_unit=WALL_SECONDS)
    ap.add_argument("--trace", type=cliargs.output_path(), required=True, help="trace JSONL (one event per line, fsynced); a new file")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing trace file")
    ap.add_argument("--trial", type=int, default=0, help="trial number (sent to the endpoints in X-MCPP-Trial)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--workflow", default=None, help="workflow file (its tasks; docs/workflows.md)")
    ap.add_argument("--learn", default=None, metavar="L",
                    help="after the run, add its trace to the learned pool L (atomically; docs/workflows.md)")
    args = ap.parse_args(argv)
    check_trace_path(args.trace, [args.pool, args.endpoints, args.tasks, args.workflow, args.learn], args.overwrite)
    pool, wf, eps, params = _checked(args, endpoints=True)
    if args.learn:
        from executor.learn import check_learn_target

        check_learn_target(args.learn, wf.workflow_hash)
    check_keys(eps, wf.stats.model_ids, args.endpoints)
    budget, deadline = resolve_limits(args, wf.arr, f"{wf.source}: ", args.time_scale)
    opt = _run_options(args)
    signalled: list[str] = []

    async def go():
        clock = Clock(args.time_scale)
        trace = Trace(args.trace)
        loop = asyncio.get_running_loop()
        try:
            async with http_client() as http:
                spec = RunSpec(budget=budget, deadline=deadline, seed=args.seed, trial=args.trial)
                async with open_run(wf, eps, args.method, spec, http=http, clock=clock, trace=trace, params=params,
                                    options=opt) as run:

                    def on_signal(sig: signal.Signals) -> None:
                        signalled.append(sig.name)
                        run.interrupt(sig.name)

                    for sig in (signal.SIGINT, signal.SIGTERM):
                        loop.add_signal_handler(sig, on_signal, sig)
                    return await run.run()
        finally:
            trace.close()

    res = asyncio.run(go())
    events, s = res.events, res.summary  # the run's own result: no re-reading of its trace
    print(redact(json.dumps(s)) if args.json else format_summary(s))
    from executor.learn import drift_lines, learn_after_run

    for line in drift_lines(events, args.pool, args.dag):
        print(line, file=sys.stderr)
    if args.learn:
        print(learn_after_run(args.learn, args.trace), file=sys.stderr)
    if res.termination != "completed":
        print(redact(f"{res.termination}: {res.message}"), file=sys.stderr)
    if res.termination == "interrupted":
        return 143 if signalled and signalled[0] == "SIGTERM" else 130
    return EXIT_CODES.get(res.termination, 0)


def cmd_summary(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor summary", description="Summarize a (cut-off) trace.")
    ap.add_argument("trace", type=cliargs.input_path())
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pool", type=cliargs.input_path(), default=None, help="test for drift against this pool (default: the run's own pool)")
    ap.add_argument("--dag", type=int, default=0, help="row of --pool")
    args = ap.parse_args(argv)
    events, torn = read_trace(args.trace)
    s = summarize(events, torn)
    print(redact(json.dumps(s)) if args.json else format_summary(s))
    from executor.learn import drift_lines

    for line in drift_lines(events, args.pool, args.dag if args.pool else None):
        print(line)
    return 0


def cmd_world(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor world", description="Serve a pool as an OpenAI-compatible world.")
    ap.add_argument("--pool", type=cliargs.input_path(), required=True)
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=1.0, help="wall seconds slept per model second")
    ap.add_argument("--seed", default="1", help="seed of the world's keyed draws")
    ap.add_argument("--fault-429", type=cliargs.number(0, 1), default=0.0)
    ap.add_argument("--fault-500", type=cliargs.number(0, 1), default=0.0)
    ap.add_argument("--fault-timeout", type=cliargs.number(0, 1), default=0.0)
    ap.add_argument("--fault-reset", type=cliargs.number(0, 1), default=0.0)
    ap.add_argument("--retry-after", type=cliargs.number(0), default=1.0, help="Retry-After of a 429 (seconds)")
    ap.add_argument("--usage", choices=("sampled", "max"), default="sampled")
    ap.add_argument("--tasks", type=cliargs.input_path(), default=None, help="tasks file of DAG --dag (what the answers must pass)")
    ap.add_argument("--dag", type=int, default=0)
    ap.add_argument("--write-endpoints", type=cliargs.output_path(), default=None, help="write an endpoints file pointing at this world")
    ap.add_argument("--max-seconds", type=cliargs.number(0, lo_inclusive=False), default=3600.0, help="stop after this many wall seconds")
    args = ap.parse_args(argv)
    if not (args.time_scale > 0) or not (args.max_seconds > 0) or not (0 <= args.port < 65536):
        raise ConfigError("--time-scale and --max-seconds must be > 0 and --port in 0..65535")
    seed = check_seed(args.seed, "--seed", "flag")
    try:
        faults = Faults(args.fault_429, args.fault_500, args.fault_timeout, args.fault_reset, args.retry_after)
    except ValueError as exc:
        raise ConfigError(f"--fault-*: {exc}") from None
    pool, dag = load_dag(args.pool, args.dag)
    if args.write_endpoints:
        check_output_path(args.write_endpoints, inputs=[args.pool, args.tasks], flag="--write-endpoints")
    tasks = {}
    if args.tasks:
        wf = make_workflow(pool, dag, args.pool, None, "", args.tasks, "token_cost_mean")
        tasks = {dag: wf.tasks}

    async def serve():
        world = World(pool, seed=seed, clock=Clock(args.time_scale), faults=faults, usage=args.usage, tasks=tasks)
        await serve_until_stopped(world, args.port, args.write_endpoints, args.max_seconds, lambda port: (
            f"loopback world on http://127.0.0.1:{port}/v1 ({len(pool)} DAGs, time scale {args.time_scale:g})"))
        print(f"world stopped: {json.dumps(stats_dict(world))}", flush=True)

    asyncio.run(serve())
    return 0


def cmd_agree(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor agree",
                                 description="Live episodes against the loopback world vs simulated ones.")
    _common(ap, endpoints=False, deadline_unit=MODEL_SECONDS)
    ap.add_argument("--runs", type=int, default=200, help="episodes on each side")
    ap.add_argument("--concurrency", type=int, default=200, help="live episodes at once")
    ap.add_argument("--world-seed", default=None, help="seed of the world's draws (default: seed + 1)")
    ap.add_argument("--z", type=cliargs.number(0, lo_inclusive=False), default=3.0, help="allowed difference in standard errors")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.time_scale == 1.0 and "--time-scale" not in argv:
        args.time_scale = 0.1
    pool, wf, _, params = _checked(args, endpoints=False)
    budget, deadline = resolve_limits(args, wf.arr, f"{wf.source}: ", args.time_scale)  # model seconds (the flag's)
    if args.runs < 2 or args.concurrency < 1:
        raise ConfigError("--runs must be >= 2 and --concurrency >= 1")
    ws = None if args.world_seed is None else check_seed(args.world_seed, "--world-seed", "flag")
    r = agree(wf, pool, args.method, budget, deadline, args.runs, scale=args.time_scale, seed=args.seed,
              world_seed=ws, params=params, concurrency=args.concurrency, z=args.z, options=_options(args))
    print(json.dumps(r) if args.json else format_agreement(r))
    return 0 if r["pass"] else 1


def cmd_demo(argv: Sequence[str]) -> int:
    ap = cliargs.ArgumentParser(prog="python -m executor demo",
                                 description="MCPP and sequential live on the example pool's first DAG.")
    ap.add_argument("--pool", type=cliargs.input_path(), default=str(EXAMPLE_POOL))
    ap.add_argument("--dag", type=int, default=0)
    ap.add_argument("--budget-ratio", type=cliargs.number(0, lo_inclusive=False), default=1.0)
    ap.add_argument("--deadline-ratio", type=cliargs.number(0, lo_inclusive=False), default=1.0)
    ap.add_argument("--time-scale", type=cliargs.number(0, lo_inclusive=False), default=0.05)
    ap.add_argument("--trace-dir", type=cliargs.output_path("dir"), default=None, help="where the two traces go (default: a temporary directory)")
    args = ap.parse_args(argv)
    pool, dag = load_dag(args.pool, args.dag)
    wf = make_workflow(pool, dag, args.pool, None, "", None, "token_cost_mean")
    budget, deadline = Limits.ratios(args.budget_ratio, args.deadline_ratio).resolve(wf.arr, f"{wf.source}: ")
    out_dir = Path(args.trace_dir or tempfile.mkdtemp(prefix="executor_demo_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    params: dict = {}  # MCPP with its defaults, as the docs' first example
    summaries = {}
    print(f"demo: one live episode per method on DAG {dag} ({wf.stats.problem_id}, {wf.stats.n_nodes} nodes), "
          f"budget {budget:.0f} tokens, deadline {deadline:.1f} model seconds ({deadline * args.time_scale:.1f} wall s "
          f"at time scale {args.time_scale:g}); a loopback world on 127.0.0.1; traces in {out_dir}", flush=True)
    for method in (MCPP, "sequential"):
        d = out_dir / method
        asyncio.run(live_episodes(wf, pool, method, budget, deadline, 1, scale=args.time_scale, seed=0,
                                  world_seed=1, params=params, trace_dir=str(d), pausable=False,
                                  options=Options(warm_up=True)))
        summaries[method] = summarize(*read_trace(d / "trial_00000.jsonl"))
    keys = (("termination", "termination"), ("on_time", "on_time"), ("makespan_s", "makespan (model s)"),
            ("spent", "spent (tokens)"), ("plans", "plans"), ("planner_ms", "planning (wall ms)"),
            ("requests", "requests"), ("retries", "retries"))
    print(f"{'':18s} {'MCPP':>22s} {'sequential':>22s}")
    for k, label in keys:
        a, b = summaries[MCPP].get(k), summaries["sequential"].get(k)
        fa = f"{a:.2f}" if isinstance(a, float) else str(a)
        fb = f"{b:.2f}" if isinstance(b, float) else str(b)
        print(f"{label:18s} {fa:>22s} {fb:>22s}")
    return 0


def cmd_quote(argv: Sequence[str]) -> int:
    from executor.quote import cmd_quote as quote_main

    return quote_main(argv)


def cmd_workflow(argv: Sequence[str]) -> int:
    from executor.workflow_cli import cmd_workflow as workflow_main

    return workflow_main(argv)


def cmd_explore(argv: Sequence[str]) -> int:
    from executor.explore import cmd_explore as explore_main

    return explore_main(argv)


COMMANDS = {"run": cmd_run, "world": cmd_world, "demo": cmd_demo, "agree": cmd_agree, "summary": cmd_summary,
            "quote": cmd_quote, "workflow": cmd_workflow, "explore": cmd_explore}


@cli_entry
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: python -m executor {run,world,demo,agree,summary,quote,workflow,explore} ...\n"
              "  run      run a workflow live on the endpoints of an endpoints file\n"
              "  world    serve a pool as an OpenAI-compatible loopback world on 127.0.0.1\n"
              "  demo     MCPP and sequential live on the example pool's first DAG, side by side\n"
              "  agree    live episodes against the loopback world vs simulated ones (exit 1 if they differ)\n"
              "  summary  the summary of a (possibly cut-off) trace\n"
              "  quote    the cheapest budget reaching a target on-time probability at a deadline\n"
              "  workflow the workflow file (DAG, node names, tasks) of a pool line\n"
              "  explore  sample every (node, model) pair of a workflow within a hard budget (docs/workflows.md)",
              file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]](argv[1:])
