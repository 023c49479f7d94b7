"""``run_experiment.sh ACTION``: the one entry point users drive.

Actions: prepare, shard N, local (= all), auto, slurm, status, resume, merge,
analyze, report, help. Settings come from the environment variables of
``docs/harness.md`` and are read ONLY by ``prepare`` (``local``/``all``/
``slurm`` prepare first); every other action reads the run directory
(``RUN_DIR``, else ``$RESULTS_ROOT/$RUN_NAME``).
"""

from __future__ import annotations

import argparse
import os
import sys

from simulator.errors import ConfigError, UserError

from .cli_util import run_cli
from .config import DEFAULT_RESULTS_ROOT, ENV_VARS, MC_DEFAULT_TEXT
from .rundir import RunDir

USAGE = """\
usage: bash run_experiment.sh ACTION [options]

actions:
  prepare          validate the settings, expand the grid, write <run>/jobs_list.txt and run.json
                   (--force: replace a different configuration; the old run is archived, never deleted)
  local | all      prepare, run every pending shard on this machine (N_WORKERS processes, progress
                   bars), then merge and analyze; prints the main results table (--no-prepare: run
                   the prepared configuration as is)
  shard N          run shard N in the foreground (line N of jobs_list.txt, 0-based)
  auto             worker loop for a shared filesystem: claim the next shard, heartbeat, mark done
                   after verifying its outputs; run any number of them on any machines
  slurm            prepare, then submit the pending shards as a SLURM job array (sbatch --array)
  status           per shard: pending / running (heartbeat age, progress) / done / failed; totals,
                   ETA, SLURM task states (-v: list every shard)
  resume           release claims whose heartbeat is older than STALE_SECONDS
                   (--retry-failed: also make failed shards pending again)
  merge            combine per-DAG outputs per cell; coverage check (exit 1 naming what is missing)
  analyze          tables (CSV + Parquet), plots (PNG) and report.md from merged/
  report           print the Markdown report (analyze first if needed)
  help             this text and the settings

settings (environment variables, read by prepare):
"""


def env_help() -> str:
    width = max(len(n) for n, _, _ in ENV_VARS)
    lines = [f"  {n.ljust(width)}  {m}" + (f" [default: {d}]" if d else "") for n, d, m in ENV_VARS]
    lines.append(f"  {'MC_PORTFOLIO_*'.ljust(width)}  MCPP parameters ({MC_DEFAULT_TEXT})")
    lines.append(f"  {'BASELINE_SUITE'.ljust(width)}  (see above) e.g. 'all': baselines re-run once per pool model")
    lines.append(f"  {'SLURM_*'.ljust(width)}  SLURM_MODE (shard|worker), SLURM_CPUS_PER_TASK, SLURM_MEM, SLURM_TIME,")
    lines.append(f"  {''.ljust(width)}  SLURM_PARTITION, SLURM_ACCOUNT, SLURM_MAX_PARALLEL, SLURM_EXTRA_ARGS")
    lines.append(f"  {'RUN_DIR'.ljust(width)}  explicit run directory for non-prepare actions")
    return "\n".join(lines)


def run_dir_from_env(env=None) -> RunDir:
    env = os.environ if env is None else env
    if (env.get("RUN_DIR") or "").strip():
        return RunDir(env["RUN_DIR"].strip())
    root = os.path.abspath((env.get("RESULTS_ROOT") or "").strip() or DEFAULT_RESULTS_ROOT)
    return RunDir(os.path.join(root, (env.get("RUN_NAME") or "").strip() or "example"))


def _float_env(name: str, default: float) -> float:
    text = (os.environ.get(name) or "").strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} must be a number") from None


def worker_options():
    from .worker import WorkerOptions

    max_f = int(_float_env("MAX_SHARD_FAILURES", 3))
    if max_f < 1:
        raise ConfigError("MAX_SHARD_FAILURES must be >= 1")
    return WorkerOptions(max_failures=max_f, heartbeat_seconds=_float_env("HEARTBEAT_SECONDS", 10.0))


def n_workers() -> int:
    from .config import cpu_count

    text = (os.environ.get("N_WORKERS") or "").strip()
    if not text or text == "all":
        return cpu_count()
    try:
        n = int(text)
    except ValueError:
        raise ConfigError(f"N_WORKERS={text!r} must be an integer") from None
    if n < 1:
        raise ConfigError("N_WORKERS must be >= 1")
    return n


def _prepare_or_load(args) -> RunDir:
    from .prepare import prepare

    if getattr(args, "no_prepare", False):
        rd = run_dir_from_env()
        rd.run  # noqa: B018  (raises a readable error when not prepared)
        return rd
    return prepare(force=getattr(args, "force", False))


def act_local(args) -> int:
    from .status import release_dead_claims, render_status, unfinished_message
    from .worker import run_local

    rd = _prepare_or_load(args)
    n = n_workers()
    release_dead_claims(rd)
    print(f"local: {len(rd.shards)} shards, {n} worker process(es)", flush=True)
    run_local(rd, n, worker_options(), progress=not args.no_progress)
    stale = _float_env("STALE_SECONDS", 120.0)
    from .state import ShardState

    st = ShardState(rd.state)
    if not all(st.is_done(s.shard_id) for s in rd.shards):
        print(render_status(rd, stale))
        print(unfinished_message(rd, stale), file=sys.stderr)
        return 1
    from .analyze import analyze_run
    from .merge import merge

    merge(rd)
    res = analyze_run(rd.merged, rd.analysis)
    print()
    print(res.main_table_text)
    print(f"\nreport: {res.report_path}")
    return 0


def act_shard(args) -> int:
    from .worker import ShardRunner

    rd = run_dir_from_env()
    if args.n is None:
        raise ConfigError("usage: run_experiment.sh shard N  (N = 0-based line of jobs_list.txt)")
    rd.shard(args.n)
    runner = ShardRunner(rd, worker_options())
    outcome = runner.run(args.n, foreground=True)
    msg = {
        "done": "done (outputs verified)",
        "skip": "already done",
        "busy": "claimed by another worker (see `status`; `resume` releases stale claims)",
    }.get(outcome, outcome)
    print(f"shard {args.n}: {msg}")
    return 0 if outcome in ("done", "skip") else 1


def act_task(args) -> int:
    """One SLURM array task: run shard N under a claim (exit 0 if already done / claimed)."""
    from .worker import ShardRunner

    rd = run_dir_from_env()
    runner = ShardRunner(rd, worker_options())
    outcome = runner.run(args.n)
    print(f"task shard {args.n}: {outcome}")
    return 0 if outcome in ("done", "skip", "busy") else 1


def act_auto(args) -> int:
    import signal

    from .status import release_dead_claims
    from .worker import ShardRunner, auto_loop

    rd = run_dir_from_env()
    runner = ShardRunner(rd, worker_options())
    release_dead_claims(rd)

    def on_term(signum, frame):  # pragma: no cover - signal path
        runner.stop.set()

    signal.signal(signal.SIGTERM, on_term)
    print(f"auto worker {runner.worker} on {rd.path}", flush=True)
    counts = auto_loop(runner, lambda n, o: print(f"  shard {n}: {o}", flush=True))
    print(f"auto worker done: {counts or 'nothing left to claim'}")
    return 1 if counts.get("failed") else 0


def act_slurm(args) -> int:
    from .slurm import submit
    from .status import release_dead_claims

    rd = _prepare_or_load(args)
    release_dead_claims(rd)  # e.g. tasks of an earlier, scancel-ed array: their shards run again
    submit(rd, os.environ)
    return 0


def act_status(args) -> int:
    from .slurm import status_lines
    from .status import render_status

    rd = run_dir_from_env()
    rd.run  # noqa: B018  (readable error when the run is not prepared)
    print(render_status(rd, _float_env("STALE_SECONDS", 120.0), args.verbose, status_lines(rd)))
    return 0


def act_resume(args) -> int:
    from .status import resume

    rd = run_dir_from_env()
    rd.run  # noqa: B018
    stale = args.stale_seconds if args.stale_seconds is not None else _float_env("STALE_SECONDS", 120.0)
    resume(rd, stale, args.retry_failed)
    return 0


def act_merge(args) -> int:
    from .merge import IncompleteRun, merge

    try:
        merge(run_dir_from_env())
    except IncompleteRun as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def act_analyze(args) -> int:
    from .analyze import analyze_run

    rd = run_dir_from_env()
    res = analyze_run(rd.merged, rd.analysis)
    print(res.main_table_text)
    print(f"\ntables, plots and report in {rd.analysis}")
    return 0


def act_report(args) -> int:
    from .analyze import analyze_run

    rd = run_dir_from_env()
    path = os.path.join(rd.analysis, "report.md")
    if not os.path.exists(path):
        analyze_run(rd.merged, rd.analysis)
    with open(path, encoding="utf-8") as fh:
        print(fh.read())
    return 0


def act_prepare(args) -> int:
    from .prepare import prepare

    prepare(force=args.force)
    return 0


ACTIONS = {
    "prepare": act_prepare,
    "local": act_local,
    "all": act_local,
    "shard": act_shard,
    "task": act_task,
    "auto": act_auto,
    "slurm": act_slurm,
    "status": act_status,
    "resume": act_resume,
    "merge": act_merge,
    "analyze": act_analyze,
    "report": act_report,
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("help", "-h", "--help"):
        print(USAGE + env_help())
        return 0
    action = argv[0]
    if action not in ACTIONS:
        print(f"error: unknown action {action!r}\n\n" + USAGE + env_help(), file=sys.stderr)
        return 2
    ap = argparse.ArgumentParser(prog=f"run_experiment.sh {action}", add_help=True)
    if action in ("shard", "task"):
        ap.add_argument("n", type=int, nargs="?", help="shard number (0-based line of jobs_list.txt)")
    ap.add_argument("--force", action="store_true", help="prepare: replace a different configuration")
    ap.add_argument("--no-prepare", action="store_true", help="local/slurm: use the prepared run as is")
    ap.add_argument("--no-progress", action="store_true", help="local: no progress bars")
    ap.add_argument("--retry-failed", action="store_true", help="resume: make failed shards pending again")
    ap.add_argument("--stale-seconds", type=float, default=None, help="resume: heartbeat age threshold")
    ap.add_argument("-v", "--verbose", action="store_true", help="status: list every shard")
    args = ap.parse_args(argv[1:])
    return run_cli(lambda: ACTIONS[action](args))


__all__ = ["main", "UserError"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
