"""``run_experiment.sh ACTION``: the one entry point users drive.

Actions: prepare, shard N, local (= all), auto, slurm, status, resume, merge,
analyze, report, claims, paper, surface, surface-serve, help. Settings come from the environment variables of
``docs/harness.md`` and are read ONLY by ``prepare`` (``local``/``all``/
``slurm`` prepare first); every other action reads the run directory
(``RUN_DIR``, else ``$RESULTS_ROOT/$RUN_NAME``).
"""

from __future__ import annotations

import os
import sys

from simulator.base import cliargs
from simulator.base.errors import ConfigError, UserError

from . import runlock, variables
from .cli_util import run_cli

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
  resume           release stale claims: owner process / SLURM task gone, or heartbeat older than
                   STALE_SECONDS (--retry-failed: also make failed shards pending again)
  merge            combine per-DAG outputs per cell; coverage check (exit 1 naming what is missing)
  analyze          tables (CSV + Parquet), plots (PNG; PDF/SVG too with PLOT_FORMATS=png,pdf,svg) and report.md
                   from merged/
  report           print the Markdown report (analyze first if needed)
  claims [RUN..]   test the paper's three claims on runs of one pool and grid (one per execution-rule mode
                   and planning-noise level): analysis/claims.md, tables (CSV, LaTeX), regime map
                   (runs: arguments or RUN_NAMES, names under RESULTS_ROOT or directories; docs/claims.md)
  paper            the paper grid (PAPER_CONFIG, default configs/paper_grid.env) end to end: one run per
                   (mode, noise level), then the claims report (--dry-run: list the runs only)
  surface          compute the prediction surface of the pool's DAGs (SURFACE_* settings; sharded, resumable)
                   with N_WORKERS local workers, merge it into <run>/surface/ with its page (--slurm: submit
                   the shards instead; then `RUN_DIR=<run>/surface_job ... auto` or SLURM, and `surface --merge`)
  surface-serve    serve the run's prediction-surface page (<run>/surface/) on 127.0.0.1:SURFACE_PORT
                   and print its URL (docs/surface.md)
  help             this text and the settings

settings (environment variables; each action checks the ones it reads before it starts, and refuses
unknown names under the harness prefixes, e.g. a misspelt MC_PORTFOLIO_*):
"""


INSTALL = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"


def install_hint(missing: str) -> str:
    """What to do when a required package is missing (instead of a ModuleNotFoundError traceback)."""
    return (
        f"the Python packages of requirements.txt are not installed for {sys.executable} (no module {missing!r}); "
        f"install them from the repository root with `{INSTALL}`, then activate the venv (`. .venv/bin/activate`) "
        "or run with PYTHON=.venv/bin/python"
    )


def missing_requirement() -> str | None:
    """The first compiled-stack package that cannot be imported here (cheap: no import), or None."""
    import importlib.util

    for name in ("numpy", "numba", "pandas", "pyarrow", "matplotlib", "tqdm"):
        if importlib.util.find_spec(name) is None:
            return name
    return None


def run_dir_from_env(env=None, settings=None):
    """``RUN_DIR``, else ``$RESULTS_ROOT/$RUN_NAME`` (from the variables table)."""
    from .rundir import RunDir

    env = os.environ if env is None else env
    v = settings if settings is not None else {n: variables.read(env, n) for n in ("RUN_DIR", "RESULTS_ROOT", "RUN_NAME")}
    if v["RUN_DIR"]:
        return RunDir(v["RUN_DIR"])
    return RunDir(os.path.join(v["RESULTS_ROOT"], v["RUN_NAME"]))


def worker_options(v):
    from .worker import WorkerOptions

    return WorkerOptions(max_failures=v["MAX_SHARD_FAILURES"], heartbeat_seconds=v["HEARTBEAT_SECONDS"])


def _prepare_or_load(args, v):
    from .prepare import prepare

    if getattr(args, "no_prepare", False):
        rd = run_dir_from_env(settings=v)
        rd.require_prepared()
        rd.check_pool_unchanged()
        return rd
    return prepare(force=getattr(args, "force", False))


def _prestart_hosts(args) -> None:
    """Start the workers' shard hosts first thing, so their imports run while this process starts and prepares.

    Only with a warm compiled-code cache (a cold one is compiled by the
    warm-up first, harness/warmup.py) and when ``prepare`` runs here (its
    ``PYTHON`` is the job lines' interpreter). Reads its two settings itself
    (light modules only, before the settings check imports the simulator); a
    bad value starts nothing and is refused by the check right after.
    """
    from simulator.base import prewarm

    from .hosts import RUN_SHARD, prestart_hosts, shard_env, threads_per_worker
    from .warmup import GROUP_KERNELS

    if (getattr(args, "no_prepare", False) or not prewarm.enabled()  # SIMULATOR_PREWARM=0, one CPU: no early start
            or not prewarm.cache_has(k for g in GROUP_KERNELS.values() for k in g)):  # fmt: skip
        return
    try:
        python, n = variables.read(os.environ, "PYTHON"), variables.read(os.environ, "N_WORKERS")
    except UserError:
        return
    n, _ = variables.capped_workers(n)  # the shards are not known yet: the per-core bound only
    prestart_hosts(python, RUN_SHARD, shard_env(threads_per_worker(variables.cores(), n)), n)


def seconds_since_process_start() -> float | None:
    """Wall seconds since this process started (Linux ``/proc``; None elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def act_local(args, v) -> int:
    import time

    from .status import release_dead_claims, render_status, unfinished_message
    from .worker import release_spare_hosts, run_local

    timings = {"start_s": seconds_since_process_start()}  # interpreter, imports and the settings check
    t = time.perf_counter()
    try:
        rd = _prepare_or_load(args, v)
    except BaseException:
        release_spare_hosts()
        raise
    timings["prepare_s"] = time.perf_counter() - t
    n, capped = variables.capped_workers(v["N_WORKERS"], len(rd.shards))
    release_dead_claims(rd)
    if capped:
        print(f"local: {capped}", file=sys.stderr)
    print(f"local: {len(rd.shards)} shards, {n} worker process(es)", flush=True)
    from . import analysis_host

    t = time.perf_counter()
    # when a core is free (the first worker has no shard left) the analysis's process starts importing its
    # libraries there, beside the last shards and the merge (harness/analysis_host.py)
    counts = run_local(rd, n, worker_options(v), progress=not args.no_progress, on_idle=analysis_host.start)
    if counts.get("fatal_exit"):  # a shard refused its input or the disk is full: said, not retried
        return counts["fatal_exit"]
    timings["shards_s"] = time.perf_counter() - t
    stale = v["STALE_SECONDS"]
    from .state import ShardState

    st = ShardState(rd.state)
    if not all(st.is_done(s.shard_id) for s in rd.shards):
        print(render_status(rd, stale))
        print(unfinished_message(rd, stale), file=sys.stderr)
        return 1
    from .merge import merge

    t = time.perf_counter()
    merge(rd)
    timings["merge_s"] = time.perf_counter() - t
    t = time.perf_counter()
    host = analysis_host.take()
    ans = host.analyze(rd.merged, rd.analysis, v["PLOT_FORMATS"]) if host is not None else None
    if not (ans and ans.get("ok")):  # no host, or it failed: the analysis here (raising the real error)
        from .analyze import analyze_run

        res = analyze_run(rd.merged, rd.analysis, formats=v["PLOT_FORMATS"])
        ans = {"main_table_text": res.main_table_text, "report_path": res.report_path, "timings": res.timings}
    timings["analysis_s"] = time.perf_counter() - t
    timings["analysis"] = ans["timings"]
    if "import_wait_s" in ans:  # the analysis ran in its host: how long it waited for the host's imports
        timings["analysis_import_wait_s"] = ans["import_wait_s"]
    cpu = os.times()  # CPU seconds of this process and of the processes it waited for (hosts, analysis)
    timings["cpu_s"], timings["children_cpu_s"] = cpu.user + cpu.system, cpu.children_user + cpu.children_system
    _write_timings(rd, timings)
    print()
    print(ans["main_table_text"])
    print(f"\nreport: {ans['report_path']}")
    return 0


def _write_timings(rd, timings: dict) -> None:
    """``<run>/logs/local_timings.json``: wall seconds of the phases of this ``local`` (never a result)."""
    from simulator.base.io_utils import atomic_write_json

    out = {k: (round(x, 3) if isinstance(x, float) else x) for k, x in timings.items()}
    atomic_write_json(os.path.join(rd.logs, "local_timings.json"), out)


def act_shard(args, v) -> int:
    from .worker import ShardRunner

    rd = run_dir_from_env(settings=v)
    if args.n is None:
        raise ConfigError("usage: run_experiment.sh shard N  (N = 0-based line of jobs_list.txt)")
    rd.shard(args.n)
    rd.check_pool_unchanged()
    runlock.hold(rd.path)  # a `prepare --force` refuses while this shard runs
    runner = ShardRunner(rd, worker_options(v))
    outcome = runner.run(args.n, foreground=True)
    msg = {
        "done": "done (outputs verified)",
        "skip": "already done",
        "busy": "claimed by another worker (see `status`; `resume` releases stale claims)",
    }.get(outcome, outcome)
    print(f"shard {args.n}: {msg}")
    return 0 if outcome in ("done", "skip") else 1


def act_task(args, v) -> int:
    """One SLURM array task: run shard N under a claim (exit 0 if already done / claimed)."""
    from .worker import ShardRunner

    rd = run_dir_from_env(settings=v)
    rd.require_prepared()
    runlock.hold(rd.path)
    runner = ShardRunner(rd, worker_options(v))
    outcome = runner.run(args.n)
    print(f"task shard {args.n}: {outcome}")
    return 0 if outcome in ("done", "skip", "busy") else 1


def act_auto(args, v) -> int:
    import signal

    from .status import release_dead_claims
    from .worker import ShardRunner, auto_loop

    rd = run_dir_from_env(settings=v)
    runner = ShardRunner(rd, worker_options(v))
    rd.check_pool_unchanged()
    runlock.hold(rd.path)
    release_dead_claims(rd)

    def on_term(signum, frame):  # pragma: no cover - signal path
        runner.stop.set()

    signal.signal(signal.SIGTERM, on_term)
    print(f"auto worker {runner.worker} on {rd.path}", flush=True)
    counts = auto_loop(runner, lambda n, o: print(f"  shard {n}: {o}", flush=True))
    print(f"auto worker done: {counts or 'nothing left to claim'}")
    if runner.fatal is not None:  # bad input, a changed pool or a full disk: not retried, the cause said
        rc, cause = runner.fatal
        print(cause if cause.startswith("error:") else f"error: {cause}", file=sys.stderr)
        return rc
    return 1 if counts.get("failed") else 0


def act_slurm(args, v) -> int:
    from .slurm import submit
    from .status import release_dead_claims

    rd = _prepare_or_load(args, v)
    release_dead_claims(rd)  # e.g. tasks of an earlier, scancel-ed array: their shards run again
    submit(rd, v)
    return 0


def act_status(args, v) -> int:
    from .slurm import status_lines
    from .status import render_status

    rd = run_dir_from_env(settings=v)
    rd.require_prepared()
    print(render_status(rd, v["STALE_SECONDS"], args.verbose, status_lines(rd)))
    return 0


def act_resume(args, v) -> int:
    from simulator.base.validation import check_number

    from .status import resume

    rd = run_dir_from_env(settings=v)
    rd.require_prepared()
    stale = v["STALE_SECONDS"]
    if args.stale_seconds is not None:
        stale = check_number(args.stale_seconds, "--stale-seconds", "flag", lo=0.0)
    resume(rd, stale, args.retry_failed)
    return 0


def act_merge(args, v) -> int:
    from .merge import IncompleteRun, merge

    try:
        merge(run_dir_from_env(settings=v))
    except IncompleteRun as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def act_analyze(args, v) -> int:
    from .analyze import analyze_run

    rd = run_dir_from_env(settings=v)
    res = analyze_run(rd.merged, rd.analysis, formats=v["PLOT_FORMATS"])
    print(res.main_table_text)
    print(f"\ntables, plots and report in {rd.analysis}")
    return 0


def act_report(args, v) -> int:
    from .analyze import analyze_run

    rd = run_dir_from_env(settings=v)
    path = os.path.join(rd.analysis, "report.md")
    if not os.path.exists(path):
        analyze_run(rd.merged, rd.analysis, formats=v["PLOT_FORMATS"])
    with open(path, encoding="utf-8") as fh:
        print(fh.read())
    return 0


def act_claims(args, v) -> int:
    from .claims import resolve_run_dirs
    from .claims_report import claims_from_dirs

    names = list(args.runs) or (v["RUN_NAMES"] or "").split()
    if names:
        dirs = resolve_run_dirs(names, variables.read(os.environ, "RESULTS_ROOT"))
    else:
        dirs = [run_dir_from_env(settings=v).path]
    res, path = claims_from_dirs(dirs, v["CLAIMS_OUT"], v["CLAIMS_MARGIN"], formats=v["PLOT_FORMATS"])
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(("- **Claim", "  - ")):
                print(line.rstrip("\n"))
    print(f"\nclaims report: {path}")
    return 0


def act_paper(args, v) -> int:
    from .paper import run_paper

    return run_paper(dry_run=args.dry_run)


def act_surface(args, v) -> int:
    from .surface.files import DamagedParts, merge_surface
    from .surface.job import JOB_DIR, prepare_surface, resolve_surface

    rd = run_dir_from_env(settings=v)
    if args.merge:
        try:
            merge_surface(rd.path)
        except DamagedParts as exc:
            print(str(exc), file=sys.stderr)
            return 1
        return 0
    cfg, run_cfg = resolve_surface()  # every setting, checked before any work
    if os.path.isdir(rd.path):
        runlock.hold(rd.path)  # a `prepare --force` of the run refuses while its surface is computed
    from .rundir import RunDir
    from .status import release_dead_claims
    from .worker import run_local

    job = RunDir(prepare_surface(rd.path, cfg, run_cfg))
    release_dead_claims(job)
    if args.slurm:
        from .slurm import submit

        submit(job, v)
        print(f"then: bash run_experiment.sh surface --merge   (RUN_DIR={rd.path})")
        return 0
    n, capped = variables.capped_workers(v["N_WORKERS"], len(job.shards))
    if capped:
        print(f"surface: {capped}", file=sys.stderr)
    print(f"surface: {len(job.shards)} shards, {n} worker process(es), {JOB_DIR}/ in {rd.path}", flush=True)
    counts = run_local(job, n, worker_options(v), progress=not args.no_progress)
    if counts.get("fatal_exit"):
        return counts["fatal_exit"]
    from .state import ShardState

    st = ShardState(job.state)
    if not all(st.is_done(s.shard_id) for s in job.shards):
        from .status import unfinished_message

        print(unfinished_message(job, v["STALE_SECONDS"]), file=sys.stderr)
        return 1
    manifest = merge_surface(rd.path)
    return 1 if manifest["missing_cells"] else 0


def act_surface_serve(args, v) -> int:
    from .surface.page import serve

    return serve(os.path.join(run_dir_from_env(settings=v).path, "surface"), v["SURFACE_PORT"])


def act_prepare(args, v) -> int:
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
    "claims": act_claims,
    "paper": act_paper,
    "surface-serve": act_surface_serve,
    "surface": act_surface,
}


def _help() -> str:
    text = USAGE + variables.help_text()
    missing = missing_requirement()
    if missing:
        text += "\n\nnote: " + install_hint(missing)
    return text


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("help", "-h", "--help"):
        print(_help())
        return 0
    action = argv[0]
    if action not in ACTIONS:
        print(f"error: unknown action {action!r}\n\n" + _help(), file=sys.stderr)
        return 2
    ap = cliargs.ArgumentParser(prog=f"run_experiment.sh {action}", add_help=True)
    if action in ("shard", "task"):
        ap.add_argument("n", type=int, nargs="?", help="shard number (0-based line of jobs_list.txt)")
    if action == "claims":
        ap.add_argument("runs", type=cliargs.input_path("any"), nargs="*", help="run names (under RESULTS_ROOT) or run directories")
    ap.add_argument("--dry-run", action="store_true", help="paper: list the runs, run nothing")
    ap.add_argument("--force", action="store_true", help="prepare: replace a different configuration")
    ap.add_argument("--no-prepare", action="store_true", help="local/slurm: use the prepared run as is")
    ap.add_argument("--no-progress", action="store_true", help="local: no progress bars")
    ap.add_argument("--merge", action="store_true", help="surface: only merge the computed parts")
    ap.add_argument("--slurm", action="store_true", help="surface: submit the shards to SLURM")
    ap.add_argument("--retry-failed", action="store_true", help="resume: make failed shards pending again")
    ap.add_argument("--stale-seconds", default=None, help="resume: heartbeat age threshold (s)")
    ap.add_argument("-v", "--verbose", action="store_true", help="status: list every shard")
    try:
        args = ap.parse_args(argv[1:])
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    missing = missing_requirement()
    if missing:
        print(f"error: {install_hint(missing)}", file=sys.stderr)
        return 2
    which = ACTIONS[action]
    key = ("local" if which is act_local else action) + (" --no-prepare" if args.no_prepare else "")
    key = key if key in variables.ACTION_GROUPS else key.replace(" --no-prepare", "")

    def run() -> int:
        if which is act_local:
            _prestart_hosts(args)
        try:
            v = variables.check_environment(os.environ, key)  # every setting of the action, before any work
            return which(args, v)
        finally:
            if which is act_local:
                from . import analysis_host
                from .hosts import release_spare_hosts

                release_spare_hosts()  # none is left after the shards; any left by a refusal end here
                analysis_host.release()  # an analysis host nobody asked (shards left unfinished)

    return run_cli(run)


__all__ = ["main", "UserError", "ConfigError"]


if __name__ == "__main__":  # pragma: no cover
    from simulator.base import jitmode

    from .cli_util import exit_now

    # This process runs no compiled code (shards, warm-ups and helpers are processes of their own): the keyed
    # RNG is not compiled at import, which saves starting numba's code generator (about a second)
    jitmode.EAGER = False
    exit_now(main())
