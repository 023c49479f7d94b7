"""Cold start: time to the first result of a fresh process with an empty numba cache.

Run by hand (never in the test suite; about 5 minutes, 8-10 with ``--compare``)::

    python -m benchmarks.bench_coldstart                      # -> benchmarks/results_coldstart.json
    python -m benchmarks.bench_coldstart --compare 5f48d5e    # this tree and git revision 5f48d5e, interleaved
    python -m benchmarks.bench_coldstart --compare 5f48d5e --write-readme   # also the section in benchmarks/README.md

What a new user meets first: ``python -m simulator simulate`` on the example
pool, once with a baseline (``--method sequential``, 10 trials) and once with
MCPP (``--method mc_portfolio_rollout``, 1 trial), each in a fresh process
with a new empty ``NUMBA_CACHE_DIR`` (cold: everything compiled), then again
with that cache (warm: the compiled code loaded). Wall time, CPU time
(user + system, of the child) and peak RSS of each process (``os.wait4``).
With ``--compare REV`` the files of git revision REV (``git archive``) run
the same commands, alternating which tree goes first; the ratio this / REV is
taken per repetition (machines are noisy: compare ratios, not times).

The per-kernel part runs one cold process of this tree with numba's compile
events and reports each compiled function's own compile time (nested
compiles subtracted), so the table names the kernels a cold start pays for.

``--grid``: README command 1's grid instead (``N_DAGS=8 N_EXEC_TRIALS=10
BUDGET_RATIOS="0.5 1 2" bash run_experiment.sh local``, a fresh results
directory each time): the seconds from the start of ``bash`` to its first
result on disk (the first per-DAG part a shard writes; parts are written
atomically, so one that exists is complete) and to the end of the whole run
(main table printed, process gone), with the compiled-code cache warm (a
cache filled by a first run of the same tree) and cold (empty), each with a
CPU-bound process running beside it (``--busy 1``, the default; 0 for
none)::

    python -m benchmarks.bench_coldstart --grid --compare 205eb08 --write-readme

``--floor``: what bounds that cold start (``benchmarks/results_coldstart_floor.json``, about 2 minutes):
the CPU seconds of the warm-up's kernel groups compiled alone, one after the other and cached; a cold
MCPP ``simulate`` at each ``NUMBA_OPT``; a warm ``simulate`` on a host-CPU and a ``NUMBA_CPU_NAME=generic``
cache; and one cold grid with ``--busy`` CPU-bound processes beside it::

    python -m benchmarks.bench_coldstart --floor
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_json

from .common import export_revision, log, measured_line, run_record, write_readme_section

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results_coldstart.json"
START, END = "<!-- bench_coldstart:start -->", "<!-- bench_coldstart:end -->"

SIMULATE = ["-m", "simulator", "simulate", "--pool", "examples/example_pool.jsonl", "--dag", "0",
            "--budget-ratio", "1", "--deadline-ratio", "1"]  # fmt: skip
COMMANDS = {
    "sequential": SIMULATE + ["--method", "sequential", "--trials", "10"],
    "mcpp": SIMULATE + ["--method", "mc_portfolio_rollout", "--trials", "1"],
}
LABELS = {
    "sequential": "`simulate --method sequential --trials 10`",
    "mcpp": "`simulate --method mc_portfolio_rollout --trials 1`",
}
#: the issue's targets for a cold start (seconds, wall, to the first result)
TARGET_S = {"sequential": 5.0, "mcpp": 8.0}

#: run inside a cold process: numba's compile events -> own seconds per compiled function
PROFILE_SCRIPT = r"""
import collections, json, sys, time
from numba.core import event
stack, own, count = [], collections.Counter(), collections.Counter()

class Listener(event.Listener):
    def on_start(self, ev):
        stack.append([time.perf_counter(), 0.0])

    def on_end(self, ev):
        t0, nested = stack.pop()
        dt = time.perf_counter() - t0
        f = ev.data["dispatcher"].py_func
        name = f.__module__ + "." + f.__qualname__.split(".<locals>")[0]
        if not f.__module__.startswith("simulator"):
            name = "numba library: " + f.__module__
        own[name] += dt - nested
        count[name] += 1
        if stack:
            stack[-1][1] += dt

event.register("numba:compile", Listener())
t0 = time.perf_counter()
import simulator.cli.main
t_import = time.perf_counter() - t0
try:
    simulator.cli.main.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps({"import_s": t_import, "total_s": time.perf_counter() - t0,
                  "own_s": dict(own), "count": dict(count)}))
"""


#: the run variants: (tree key, environment on top); "no helper" is this tree with the cold-start helper off
NO_HELPER = "this, no helper"
VARIANT_ENV = {NO_HELPER: {"SIMULATOR_PREWARM": "0"}}


def run_child(args: list[str], cache: str, cwd: Path) -> dict:
    """One process of ``python ARGS`` in ``cwd`` with ``NUMBA_CACHE_DIR=cache``: its output and wall time."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(cwd)}
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed in {cwd}:\n{p.stderr[-2000:]}")
    return {"wall_s": time.perf_counter() - t, "stdout": p.stdout}


def timed_child(args: list[str], cache: str, cwd: Path, extra_env: dict | None = None) -> dict:
    """Like :func:`run_child`, with the child's CPU time (its helper's included) and peak RSS from ``os.wait4``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(cwd), **(extra_env or {})}
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed in {cwd}:\n{err.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024.0}


def cold_and_warm(tree: Path, command: str, extra_env: dict | None = None) -> dict:
    """A cold process (new empty cache), then a warm one (that cache)."""
    with tempfile.TemporaryDirectory(prefix="numba_cold_") as cache:
        cold = timed_child(COMMANDS[command], cache, tree, extra_env)
        warm = timed_child(COMMANDS[command], cache, tree, extra_env)
    return {"cold": cold, "warm": warm}


def kernel_profile(tree: Path, command: str) -> dict:
    """Own compile seconds per compiled function in one cold process of ``tree``."""
    with tempfile.TemporaryDirectory(prefix="numba_cold_") as cache:
        out = run_child(["-c", PROFILE_SCRIPT, *COMMANDS[command][2:]], cache, tree)["stdout"]
    return json.loads(out.strip().splitlines()[-1])


def measure(reps: int, compare: str | None, log) -> dict:
    with tempfile.TemporaryDirectory(prefix="coldstart_") as tmp:
        trees = {"this": ROOT, NO_HELPER: ROOT}
        if compare:
            trees[compare] = Path(tmp) / "before"
            trees[compare].mkdir()
            export_revision(compare, trees[compare])
        runs: dict[str, dict[str, list[dict]]] = {t: {c: [] for c in COMMANDS} for t in trees}
        for r in range(reps):
            names = list(trees) if r % 2 == 0 else list(trees)[::-1]  # alternate which tree goes first
            for command in COMMANDS:
                for name in names:
                    res = cold_and_warm(trees[name], command, VARIANT_ENV.get(name))
                    runs[name][command].append(res)
                    log(f"rep {r + 1}/{reps} {name:>8} {command:>10}: cold {res['cold']['wall_s']:.1f} s "
                        f"(cpu {res['cold']['cpu_s']:.1f}), warm {res['warm']['wall_s']:.1f} s")  # fmt: skip
        profile = {c: kernel_profile(ROOT, c) for c in COMMANDS}
    summary = {}
    for name, per in runs.items():
        summary[name] = {
            c: {
                f"{phase}_{k}_median": statistics.median(x[phase][k] for x in v)
                for phase in ("cold", "warm")
                for k in ("wall_s", "cpu_s", "peak_rss_mb")
            }
            for c, v in per.items()
        }
    ratios = {}
    for other in [NO_HELPER] + ([compare] if compare else []):
        for c in COMMANDS:
            per_rep = [a["cold"]["wall_s"] / b["cold"]["wall_s"] for a, b in zip(runs["this"][c], runs[other][c])]
            ratios.setdefault(other, {})[c] = {"median": statistics.median(per_rep), "min": min(per_rep),
                                               "max": max(per_rep)}  # fmt: skip
    return {"runs": runs, "summary": summary, "cold_wall_ratio_this_over_before": ratios, "kernels": profile}


def markdown(res: dict) -> str:
    s, cmp_rev = res["summary"], res["args"]["compare"]
    lines = [START, "## Cold start (`bench_coldstart.py`)", "", "```bash",
             f"python -m benchmarks.bench_coldstart{' --compare ' + cmp_rev if cmp_rev else ''} --write-readme"
             "   # -> benchmarks/results_coldstart.json", "```", "",
             "A fresh process with a new empty `NUMBA_CACHE_DIR` to its first result (cold), then the same command "
             "with that cache (warm); medians of "
             f"{res['args']['reps']} repetitions"
             + (f", this tree and revision `{cmp_rev}` alternating which runs first" if cmp_rev else "") + ". "
             f"`{NO_HELPER}` is this tree with `SIMULATOR_PREWARM=0`: one process compiles everything (by default "
             "`simulate` starts a helper process that compiles part of the kernels on the other core, "
             "simulator/base/prewarm.py; CPU time includes the helper's).", "",
             "| command | tree | cold wall s | cold CPU s | warm wall s | peak RSS MB (cold) | target |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for c in COMMANDS:
        for name in s:
            x = s[name][c]
            lines.append(f"| {LABELS[c]} | {name if name in ('this', NO_HELPER) else '`' + name + '`'} | "
                         f"{x['cold_wall_s_median']:.1f} | {x['cold_cpu_s_median']:.1f} | {x['warm_wall_s_median']:.1f}"
                         f" | {x['cold_peak_rss_mb_median']:.0f} | {TARGET_S[c]:.0f} s |")  # fmt: skip
    for other, per in res["cold_wall_ratio_this_over_before"].items():
        lines += ["", f"Cold wall time, this tree / `{other}` (per repetition): " + "; ".join(
            f"{c} {r['median']:.2f} (range {r['min']:.2f}-{r['max']:.2f})" for c, r in per.items()) + "."]  # fmt: skip
    for c, prof in res["kernels"].items():
        own = sorted(prof["own_s"].items(), key=lambda kv: -kv[1])
        total = sum(v for _, v in own)
        lines += ["", f"Compile seconds per function, one cold {LABELS[c]} process without the helper (own time, nested compiles "
                  f"subtracted; {total:.1f} s of compilation in {prof['total_s']:.1f} s, imports {prof['import_s']:.1f} s): "
                  + ", ".join(f"{k.replace('simulator.', '')} {v:.2f}" + (f" (x{prof['count'][k]})" if prof['count'][k] > 1 else "")
                              for k, v in own[:10]) + "."]  # fmt: skip
    lines += ["", measured_line(res) + " (other processes on the machine lengthen both trees' times "
              "alike; the ratio is the comparison).", END]  # fmt: skip
    return "\n".join(lines)


GRID_ENV = {"N_DAGS": "8", "N_EXEC_TRIALS": "10", "BUDGET_RATIOS": "0.5 1 2"}
GRID_START, GRID_END = "<!-- bench_coldstart_grid:start -->", "<!-- bench_coldstart_grid:end -->"
GRID_OUT = ROOT / "benchmarks" / "results_coldstart_grid.json"
#: the issue's target: README command 1's first result within 5 s with a CPU-bound process beside it
GRID_TARGET_S = 5.0


def grid_once(tree: Path, cache: str, tmp: str) -> dict:
    """One ``local`` of README command 1 in ``tree``: seconds to the first part on disk and to the end."""
    import glob
    import shutil

    results = tempfile.mkdtemp(prefix="grid_", dir=tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MC_PORTFOLIO_", "PLANNING_", "PLOT_"))}
    env.update({**GRID_ENV, "RESULTS_ROOT": results, "PYTHON": sys.executable, "NUMBA_CACHE_DIR": cache})
    env.pop("NUMBA_NUM_THREADS", None)
    pattern = os.path.join(results, "example", "outputs", "*", "dag_*.jsonl")
    t0 = time.perf_counter()
    p = subprocess.Popen(["bash", "run_experiment.sh", "local", "--no-progress"], cwd=tree, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    first = None
    while p.poll() is None:
        if first is None and glob.glob(pattern):
            first = time.perf_counter() - t0
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    err = p.stderr.read()
    shutil.rmtree(results, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"local failed in {tree}:\n{err.decode()[-2000:]}")
    return {"first_s": first if first is not None else wall, "wall_s": wall}


def measure_grid(reps: int, compare: str | None, busy: int, log) -> dict:
    """README command 1 in this tree (and ``compare``), warm and cold cache, a CPU-bound process beside it."""
    with tempfile.TemporaryDirectory(prefix="coldstart_grid_") as tmp:
        trees = {"this": ROOT}
        if compare:
            trees[compare] = Path(tmp) / "before"
            trees[compare].mkdir()
            export_revision(compare, trees[compare])
        caches = {t: tempfile.mkdtemp(prefix="numba_warm_", dir=tmp) for t in trees}
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            for t in trees:  # fill each tree's warm cache (and its page cache) first
                grid_once(trees[t], caches[t], tmp)
            runs = {t: {"warm": [], "cold": []} for t in trees}
            for r in range(reps):
                names = list(trees) if r % 2 == 0 else list(trees)[::-1]
                for kind in ("warm", "cold"):
                    for name in names:
                        cache = caches[name] if kind == "warm" else tempfile.mkdtemp(prefix="numba_cold_", dir=tmp)
                        res = grid_once(trees[name], cache, tmp)
                        runs[name][kind].append(res)
                        log(f"rep {r + 1}/{reps} {name:>8} {kind}: first result {res['first_s']:.1f} s, "
                            f"whole run {res['wall_s']:.1f} s")  # fmt: skip
        finally:
            for h in hogs:
                h.kill()
                h.wait()
    summary = {t: {k: {m: statistics.median(x[m] for x in v) for m in ("first_s", "wall_s")} for k, v in per.items()}
               for t, per in runs.items()}  # fmt: skip
    return {"runs": runs, "summary": summary}


def markdown_grid(res: dict) -> str:
    s, cmp_rev = res["summary"], res["args"]["compare"]
    busy = res["args"]["busy"]
    lines = [GRID_START, "## Cold start of README command 1's grid (`bench_coldstart.py --grid`)", "", "```bash",
             f"python -m benchmarks.bench_coldstart --grid{' --compare ' + cmp_rev if cmp_rev else ''} --write-readme"
             "   # -> benchmarks/results_coldstart_grid.json", "```", "",
             "`N_DAGS=8 N_EXEC_TRIALS=10 BUDGET_RATIOS=\"0.5 1 2\" bash run_experiment.sh local` in a fresh results "
             "directory: seconds from the start to the first result on disk (the first per-DAG part) and to the end "
             f"(main table printed, process gone), with {busy} CPU-bound process(es) running beside it on the "
             f"{os.cpu_count()} cores; *warm*: the compiled-code cache filled by an earlier run of the same tree, "
             f"*cold*: an empty one. Medians of {res['args']['reps']} repetitions, the trees alternating.", "",
             "| tree | cache | first result s | whole run s | target (first result) |", "|---|---|---|---|---|"]  # fmt: skip
    for name, per in s.items():
        for kind in ("warm", "cold"):
            x = per[kind]
            lines.append(f"| {name if name == 'this' else '`' + name + '`'} | {kind} | {x['first_s']:.1f} | "
                         f"{x['wall_s']:.1f} | {GRID_TARGET_S:.0f} s |")  # fmt: skip
    lines += ["", measured_line(res) + ", the CPU-bound process(es) included.", GRID_END]  # fmt: skip
    return "\n".join(lines)


FLOOR_OUT = ROOT / "benchmarks" / "results_coldstart_floor.json"
SEQUENTIAL_200K = SIMULATE + ["--method", "sequential", "--trials", "200000"]


def _cache_mb(cache: str) -> float:
    return sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file()) / 1e6


def measure_floor(busy: int, log) -> dict:
    """What bounds the empty-cache start of README command 1's grid: the CPU seconds of the warm-up's kernel
    groups (alone, one after the other, cached), numba's optimisation level, a CPU-generic cache, and one cold
    grid with ``busy`` CPU-bound processes beside it (``--floor``)."""
    import shutil

    res: dict = {}
    with tempfile.TemporaryDirectory(prefix="coldstart_floor_") as tmp:
        env = {**os.environ, **GRID_ENV, "RESULTS_ROOT": tmp, "PYTHON": sys.executable}
        subprocess.run(["bash", "run_experiment.sh", "prepare"], cwd=ROOT, env=env, check=True, capture_output=True)
        run_dir = os.path.join(tmp, "example")

        def group(name: str, cache: str) -> float:
            return timed_child(["-m", "harness.warmup", run_dir, name], cache, ROOT)["cpu_s"]

        def fresh() -> str:
            return tempfile.mkdtemp(prefix="numba_cold_", dir=tmp)

        groups = {"baseline alone": group("baseline", fresh())}
        cache = fresh()
        groups["mcpp alone"] = group("mcpp", cache)
        res["mcpp_cache_mb"] = _cache_mb(cache)
        cache = fresh()
        group("baseline", cache)
        groups["mcpp after baseline"] = group("mcpp", cache)
        groups["both cached (a warm-up that compiles nothing)"] = group("baseline", cache)
        res["groups_cpu_s"] = groups
        log(f"kernel groups, CPU s: {groups}")
        res["numba_opt_cpu_s"] = {
            o: timed_child(COMMANDS["mcpp"], fresh(), ROOT, {"NUMBA_OPT": o, "SIMULATOR_PREWARM": "0"})["cpu_s"]
            for o in ("0", "1", "2", "3")
        }
        log(f"cold `simulate` MCPP by NUMBA_OPT, CPU s: {res['numba_opt_cpu_s']}")
        warm = {}
        for cpu in ("host", "generic"):
            extra = {"NUMBA_CPU_NAME": "generic"} if cpu == "generic" else {}
            cache = fresh()
            timed_child(SEQUENTIAL_200K, cache, ROOT, extra)  # cold: compiles
            warm[cpu] = min(timed_child(SEQUENTIAL_200K, cache, ROOT, extra)["wall_s"] for _ in range(3))
        res["warm_sequential_200k_wall_s"] = warm
        log(f"warm `simulate --method sequential --trials 200000`, best of 3 wall s: {warm}")
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
        try:
            res["cold_grid"] = grid_once(ROOT, fresh(), tmp)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        log(f"cold grid with {busy} CPU-bound process(es): {res['cold_grid']}")
        shutil.rmtree(run_dir, ignore_errors=True)
    return res


def markdown_floor(res: dict) -> str:
    g, opt, warm = res["groups_cpu_s"], res["numba_opt_cpu_s"], res["warm_sequential_200k_wall_s"]
    lines = ["| warm-up kernel group (`python -m harness.warmup RUN_DIR GROUP`), empty cache | CPU s |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in g.items()]
    lines += ["", "cold `simulate --method mc_portfolio_rollout --trials 1` (no helper), CPU s by `NUMBA_OPT`: "
              + ", ".join(f"{k}: {v:.2f}" for k, v in opt.items()),
              f"warm `simulate --method sequential --trials 200000`, best of 3: compiled for this CPU {warm['host']:.2f} s, "
              f"`NUMBA_CPU_NAME=generic` {warm['generic']:.2f} s; the MCPP group's cache {res['mcpp_cache_mb']:.1f} MB",
              f"cold grid, {res['args']['busy']} CPU-bound process(es) beside it: first result "
              f"{res['cold_grid']['first_s']:.1f} s, whole run {res['cold_grid']['wall_s']:.1f} s",
              measured_line(res) + "."]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3, help="cold + warm runs per command and tree (3)")
    ap.add_argument("--compare", metavar="REV", help="also run git revision REV, interleaved")
    ap.add_argument("--out", type=cliargs.output_path(), default=str(OUT))
    ap.add_argument("--write-readme", action="store_true")
    ap.add_argument("--grid", action="store_true", help="README command 1's grid instead of `simulate`")
    ap.add_argument("--busy", type=int, default=1, help="--grid: CPU-bound processes running beside it (1)")
    ap.add_argument("--floor", action="store_true",
                    help="what bounds the empty-cache start: the kernel groups' CPU seconds, NUMBA_OPT, a generic cache")
    args = ap.parse_args(argv)
    if args.floor:
        out = str(FLOOR_OUT) if args.out == str(OUT) else args.out
        res = run_record(args)
        res.update(measure_floor(args.busy, log))
        res["load_after"] = os.getloadavg()[0]
        atomic_write_json(out, res)
        print(markdown_floor(res))
        return 0
    if args.grid:
        out = str(GRID_OUT) if args.out == str(OUT) else args.out
        res = run_record(args)
        res.update(measure_grid(args.reps, args.compare, args.busy, log))
        res["load_after"] = os.getloadavg()[0]
        atomic_write_json(out, res)
        print(markdown_grid(res))
        if args.write_readme:
            write_readme_section(GRID_START, GRID_END, markdown_grid(res))
            print("updated benchmarks/README.md")
        return 0
    res = run_record(args)
    res.update(measure(args.reps, args.compare, log))
    res["load_after"] = os.getloadavg()[0]
    atomic_write_json(args.out, res)
    print(f"wrote {args.out}")
    if args.write_readme:
        write_readme_section(START, END, markdown(res))
        print("updated benchmarks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
