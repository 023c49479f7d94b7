"""``paper``: the paper grid end to end: one run per (execution-rule mode, noise level), then ``claims``.

The grid lives in a committed file (``configs/paper_grid.env``: KEY=VALUE
lines of harness variables plus the ``PAPER_*`` ones); a variable set in the
environment overrides the file, so a quick check is ``N_DAGS=8
N_EXEC_TRIALS=10 bash run_experiment.sh paper``. Each run is an ordinary
``local`` (or ``slurm``) run in its own directory
``$RESULTS_ROOT/<PAPER_NAME>_<mode>_<noise>``, so an interrupted ``paper``
resumes where it stopped (finished shards are kept) and any run can be
inspected on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

from simulator.base.errors import ConfigError, UserError
from simulator.base.validation import check_choice, check_distinct, check_input_file, check_number, closest

from . import variables
from .claims import MODES

#: the figure formats of `paper` unless PLOT_FORMATS (environment or config) says otherwise
PAPER_PLOT_FORMATS = "png,pdf,svg"
NOISE_VARS = ("PLANNING_NOISE_LOGIT_SIGMA", "PLANNING_NOISE_LATENCY_SIGMA", "PLANNING_NOISE_COST_SIGMA")


def read_config(path: str) -> dict[str, str]:
    """KEY=VALUE lines (``#`` comments, optional quotes); unknown keys are refused naming the line."""
    check_input_file(path, "PAPER_CONFIG", "environment")
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key.isidentifier():
                raise ConfigError(f"{path} line {n}: expected KEY=VALUE, got {line!r}")
            if key not in variables.BY_NAME:
                hint = closest(key, variables.BY_NAME)
                raise ConfigError(f"{path} line {n}: {key} is not a harness setting" + (f" (did you mean {hint}?)"
                                                                                        if hint else ""))  # fmt: skip
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[key] = value
    return out


def noise_levels(text: str) -> list[float]:
    vals = [check_number(t, "PAPER_NOISE_LEVELS", "paper grid", lo=0.0) for t in text.replace(",", " ").split()]
    if not vals:
        raise ConfigError("PAPER_NOISE_LEVELS is empty: give at least 0 (exact planning statistics)")
    check_distinct(vals, "PAPER_NOISE_LEVELS", "paper grid")
    return vals


def modes(text: str) -> list[str]:
    out = [check_choice(t, "PAPER_MODES", MODES, "paper grid") for t in text.replace(",", " ").split()]
    if not out:
        raise ConfigError(f"PAPER_MODES is empty: give one or more of {', '.join(MODES)}")
    check_distinct(out, "PAPER_MODES", "paper grid")
    return out


def plan_runs(env: Mapping[str, str]) -> tuple[list[tuple[str, dict[str, str]]], dict[str, str]]:
    """The runs of the paper grid: [(run name, full environment)], and the merged settings."""
    path = variables.read(env, "PAPER_CONFIG")
    merged = {**read_config(path), **{k: v for k, v in env.items() if v.strip()}}
    merged.setdefault("PLOT_FORMATS", PAPER_PLOT_FORMATS)  # paper-ready figures: vector formats beside the PNGs
    name = variables.read(merged, "PAPER_NAME")
    ms = modes(merged.get("PAPER_MODES") or " ".join(MODES))
    levels = noise_levels(merged.get("PAPER_NOISE_LEVELS") or "0")
    if 0.0 not in levels:
        levels = [0.0, *levels]  # claim 2 compares each noisy run with the exact one
    noisy_methods = merged.get("PAPER_NOISY_METHODS") or "mcpp"
    runs = []
    for mode in ms:
        for level in levels:
            tag = "exact" if level == 0 else f"noise{level:g}"
            e = {k: v for k, v in merged.items() if not k.startswith(("PAPER_", "CLAIMS_")) and k != "RUN_NAMES"}
            e.pop("RUN_DIR", None)
            e["RUN_NAME"] = f"{name}_{mode}_{tag}"
            e["EXECUTION_RULES"] = mode
            for var in NOISE_VARS:
                e[var] = f"{level:g}"
            if level > 0:
                e["METHOD_SET"] = noisy_methods
            runs.append((e["RUN_NAME"], e))
    return runs, merged


def run_paper(env: Mapping[str, str] | None = None, dry_run: bool = False) -> int:
    """Run every (mode, noise level) of the grid, then the claims report; returns the exit code."""
    env = dict(os.environ if env is None else env)
    runs, merged = plan_runs(env)
    backend = variables.read(merged, "PAPER_BACKEND")
    known = "EXECUTION_RULES" in variables.BY_NAME
    if not known:
        skipped = sorted({e["EXECUTION_RULES"] for _, e in runs} - {"published"})
        runs = [(n, e) for n, e in runs if e["EXECUTION_RULES"] == "published"]
        for _, e in runs:
            e.pop("EXECUTION_RULES")
        if skipped:
            print(f"paper: this harness has no EXECUTION_RULES setting yet; running the published mode only "
                  f"(skipped: {', '.join(skipped)})", flush=True)  # fmt: skip
        if not runs:
            raise UserError("paper: no run left (PAPER_MODES has no `published` and this harness cannot set the "
                            "execution rules)")  # fmt: skip
    root = variables.read(merged, "RESULTS_ROOT")
    dirs = [os.path.join(root, n) for n, _ in runs]
    out = variables.read(merged, "CLAIMS_OUT") or os.path.join(root, f"{variables.read(merged, 'PAPER_NAME')}_claims")
    print(f"paper: {len(runs)} run(s) under {root}: {', '.join(n for n, _ in runs)}", flush=True)
    repo = variables.REPO
    for n, e in runs:
        cmd = [sys.executable, "-m", "harness.cli", "local" if backend == "local" else "slurm"]
        print(f"\n=== {n} ({'EXECUTION_RULES=' + e['EXECUTION_RULES'] if 'EXECUTION_RULES' in e else 'published'}, "
              f"noise sigma {e[NOISE_VARS[0]]}) ===", flush=True)  # fmt: skip
        if dry_run:
            continue
        full = {**os.environ, **e, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
        full = {k: v for k, v in full.items() if not k.startswith(("PAPER_", "CLAIMS_")) and k not in ("RUN_NAMES",
                                                                                                          "RUN_DIR")}
        rc = subprocess.call(cmd, env=full)
        if rc != 0:
            print(f"paper: run {n} stopped with exit {rc}; fix it and run `paper` again (finished shards are kept)",
                  file=sys.stderr)  # fmt: skip
            return rc
    formats = variables.read(merged, "PLOT_FORMATS")
    claims_cmd = f"CLAIMS_OUT={out} PLOT_FORMATS={','.join(formats)} bash run_experiment.sh claims " + " ".join(dirs)
    if backend == "slurm" or dry_run:
        print(f"\npaper: when the runs are done, write the claims report with:\n  {claims_cmd}")
        return 0
    from .claims_report import claims_from_dirs

    margin = variables.read(merged, "CLAIMS_MARGIN")
    res, path = claims_from_dirs(dirs, out, margin, formats=formats)
    print("\n" + "\n".join(line for line in open(path, encoding="utf-8").read().splitlines()
                           if line.startswith(("- **Claim", "  - "))))  # fmt: skip
    print(f"\nclaims report: {path}\n(regenerate: {claims_cmd})")
    return 0
