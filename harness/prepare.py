"""``prepare``: validate, expand the grid, write ``jobs_list.txt`` and ``run.json``.

Re-preparing the same configuration is a no-op for the results (finished
outputs are reused; a new shard layout only re-cuts the jobs). Preparing a
*different* configuration into an existing run directory is refused unless
``--force``, which moves the old run aside into ``archive/<time>/`` — results
are never deleted.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

from simulator.base import cliargs
from simulator.base.errors import ConfigError
from simulator.base.io_utils import atomic_write_json, atomic_write_text
from simulator.costs.modes import cost_unit

from . import runlock
from .config import REPO, RunConfig, resolve_config
from .grid import format_value
from .pool_index import POOL_INDEX, write_pool_index
from .rundir import OUTPUTS, STATE, RunDir
from .shards import layout_shards, verify_shard
from .state import ShardState

RUN_FORMAT = "mcpp-harness-run/1"


def package_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("numpy", "numba", "llvmlite", "scipy", "pandas", "pyarrow", "matplotlib", "tqdm"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    try:
        import simulator

        out["simulator"] = simulator.__version__
    except Exception:  # pragma: no cover
        pass
    return out


def git_commit() -> dict[str, str | bool]:
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        if head.returncode == 0:
            return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {}


def _short(v, width: int = 70) -> str:
    text = repr(v)
    return text if len(text) <= width else text[: width - 3] + "..."


def settings_diff(old: Mapping, new: Mapping) -> list[str]:
    return [
        f"  {k}: prepared {_short(old.get(k))}, now {_short(new.get(k))}"
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    ]


def archive_run(rd: RunDir) -> str:
    """Move the run's files into ``archive/<time>/`` (never delete results)."""
    dest = rd.p("archive", time.strftime("%Y%m%d-%H%M%S"))
    n = 0
    while os.path.exists(dest):
        n += 1
        dest = rd.p("archive", time.strftime("%Y%m%d-%H%M%S") + f"-{n}")
    os.makedirs(dest)
    for name in ("run.json", "jobs_list.txt", POOL_INDEX, "outputs", "state", "logs", "merged", "analysis", "slurm"):
        src = rd.p(name)
        if os.path.exists(src):
            shutil.move(src, os.path.join(dest, name))
    return dest


def run_record(cfg: RunConfig, shards, rd: RunDir) -> dict:
    from .methods import method_labels

    return {
        "format": RUN_FORMAT,
        "run_name": cfg.run_name,
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "fingerprint": cfg.fingerprint(),
        "settings": cfg.settings(),
        "pool": {"path": cfg.pool_path, "sha256": cfg.pool_sha256, "rows": cfg.pool_rows, "models": cfg.pool_models,
                 "index": POOL_INDEX},
        "cells": [c.to_json() for c in cfg.grid.cells()],
        "method_labels": [m.to_json() for m in method_labels(cfg.methods, cfg.baseline_suite)],
        "nominal_summary": cfg.nominal_summary,
        "layout": {"dags_per_shard": cfg.dags_per_shard, "n_shards": len(shards)},
        "python": cfg.python,
        "environment": {"versions": package_versions(), "git": git_commit(), "host": platform.node()},
        "env_resolved": cfg.env_resolved,
        "shards": [s.to_json() for s in shards],
    }


def prepare(
    env: Mapping[str, str] | None = None,
    force: bool = False,
    out: Callable[[str], None] = print,
    quiet: bool = False,
) -> RunDir:
    """Validate the configuration and (re)write the run's job list; see the module docstring."""
    cfg = resolve_config(env)
    rd = RunDir(cfg.run_dir)
    shards = layout_shards(cfg, OUTPUTS, STATE, POOL_INDEX)  # relative: job lines run in the run directory
    record = run_record(cfg, shards, rd)
    state = ShardState(rd.state) if os.path.exists(rd.state) else None
    if os.path.exists(rd.run_json):
        try:
            old = rd.run
        except ConfigError:  # a damaged run.json: only --force may replace it (archived, not deleted)
            if not force:
                raise
            old = {}
        if old.get("fingerprint") != record["fingerprint"]:
            if not force:
                diff = settings_diff(old.get("settings", {}), record["settings"])
                raise ConfigError(
                    f"{rd.path} already holds a run prepared with a different configuration:\n"
                    + "\n".join(diff)
                    + "\nUse another RUN_NAME, restore the settings, or add --force to move the old run into "
                    f"{rd.p('archive')}/ (nothing is deleted)."
                )
            with runlock.exclusive(rd.path, "prepare --force"):  # refused while another process computes it
                dest = archive_run(rd)
            out(f"prepare --force: the previous run was moved to {dest}")
            state = None
        elif old.get("shards") != record["shards"] and state is not None:
            running = [s["shard"] for s in old.get("shards", []) if state.exists(f"s{s['shard']:05d}", "claim")]
            if running:
                raise ConfigError(
                    f"the shard layout changed (DAGS_PER_SHARD) but shards {running[:10]} are claimed (running); "
                    "wait for them, or `resume` stale claims, before re-preparing"
                )
            for s in old.get("shards", []):
                state.reset(f"s{s['shard']:05d}")
            out("prepare: new shard layout; finished per-DAG outputs are kept and reused")
        if old.get("fingerprint") == record["fingerprint"]:
            record["prepared_at"] = old.get("prepared_at", record["prepared_at"])
    os.makedirs(rd.path, exist_ok=True)
    runlock.hold(rd.path)  # for the rest of this process (`local` computes the run next)
    for d in (rd.outputs, rd.state, rd.logs):
        os.makedirs(d, exist_ok=True)
    write_pool_index(rd.p(POOL_INDEX), cfg.pool_index)  # before the job lines that name it
    atomic_write_json(rd.run_json, record)
    atomic_write_text(rd.jobs_list, "".join(s.command(cfg.python) + "\n" for s in shards))
    rd.__dict__.pop("run", None)
    rd.__dict__.pop("shards", None)
    # Shards whose outputs already verify (a re-layout, or a copied run) are done.
    state = ShardState(rd.state)
    n_done = 0
    if any(os.scandir(rd.outputs)):
        for s in shards:
            if not state.is_done(s.shard_id) and all(c.ok for c in verify_shard(s, rd.outputs).values()):
                state.mark_done(s.shard_id, {"worker": "prepare", "verified": True})
            n_done += state.is_done(s.shard_id)
    if not quiet:
        out(describe(cfg, record, rd, n_done))
    return rd


def describe(cfg: RunConfig, record: dict, rd: RunDir, n_done: int) -> str:
    lines = ["Resolved settings:"]
    width = max(len(k) for k in cfg.env_resolved)
    for k, v in cfg.env_resolved.items():
        lines.append(f"  {k.ljust(width)} = {v}")
    if cfg.planning:
        lines.append(f"  planning statistics (robustness): {cfg.planning}")
    lines.append(cfg.grid.describe())
    for name, s in cfg.nominal_summary.items():
        unit = "model seconds" if "deadline" in name else cost_unit(cfg.cost_mode)
        lines.append(
            f"  {name} over the {len(cfg.dags)} DAGs: min {format_value(round(s['min'], 4))}, "
            f"median {format_value(round(s['median'], 4))}, max {format_value(round(s['max'], 4))} {unit}"
        )
    n_labels = len(record["method_labels"])
    n_rec = len(cfg.dags) * len(cfg.grid.cells()) * n_labels * cfg.n_trials
    lines.append(
        f"{len(cfg.dags)} DAGs x {len(cfg.grid.cells())} cells x {n_labels} methods x {cfg.n_trials} trials = "
        f"{n_rec} records in {record['layout']['n_shards']} shards ({cfg.dags_per_shard} DAG(s) per shard"
        f"{f'; {n_done} already done' if n_done else ''})"
    )
    lines.append(f"run directory: {rd.path}  (fingerprint {record['fingerprint']})")
    lines.append(f"jobs: {rd.jobs_list}")
    return "\n".join(lines)


def main_prepare(argv: list[str] | None = None) -> int:

    from .cli_util import run_cli

    ap = cliargs.ArgumentParser(
        prog="gen_jobs.py",
        description="Validate the harness settings (environment variables of docs/harness.md), expand the "
        "(budget, deadline) grid and write <run>/jobs_list.txt and <run>/run.json.",
    )
    ap.add_argument("--force", action="store_true", help="replace a different configuration (old run archived)")
    ap.add_argument("--quiet", action="store_true", help="print nothing on success")

    def go() -> int:
        args = ap.parse_args(argv)
        prepare(force=args.force, quiet=args.quiet)
        return 0

    return run_cli(go)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_prepare())
