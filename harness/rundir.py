"""The layout of a run directory, and reading a prepared run back.

::

    <run>/run.json            all settings, pool checksum, versions, the shard list
    <run>/jobs_list.txt       one self-contained command per shard (line N = shard N)
    <run>/pool_index.json     where each DAG row of the run is in the pool file(s) (harness/pool_index.py)
    <run>/outputs/<group>/dag_<row>.jsonl   per-(budget group, DAG) records
    <run>/state/sNNNNN.*      claim, heartbeat, progress, done, failures, failed
    <run>/logs/sNNNNN.log     output of every attempt of a shard (slurm/ for SLURM)
    <run>/merged/             merge_report.json, cells/<cell>/{records.jsonl,params.json}
    <run>/analysis/           tables (CSV + Parquet), report.md, plots/*.png
    <run>/archive/<time>/     what ``prepare --force`` moved aside (never deleted)

Every path is derived from the run directory itself, and the paths written
inside a run (job lines, ``run.json``) are relative to it (job lines run with
the run directory as working directory), so a run directory moved or copied
elsewhere (``cp -a``, another machine) works on its own files: it can be
resumed, repaired, merged and analysed without touching the original.
"""

from __future__ import annotations

import os
from functools import cached_property

from simulator.base.errors import ConfigError

from .runjson import read_run_json
from .shards import ShardSpec

#: Run-internal directories, as written (relative) into job lines and run.json.
OUTPUTS = "outputs"
STATE = "state"


class RunDir:
    """Paths of one run directory."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)

    def p(self, *parts: str) -> str:
        return os.path.join(self.path, *parts)

    @property
    def run_json(self) -> str:
        return self.p("run.json")

    @property
    def jobs_list(self) -> str:
        return self.p("jobs_list.txt")

    @property
    def outputs(self) -> str:
        return self.p(OUTPUTS)

    @property
    def state(self) -> str:
        return self.p(STATE)

    @property
    def logs(self) -> str:
        return self.p("logs")

    @property
    def merged(self) -> str:
        return self.p("merged")

    @property
    def analysis(self) -> str:
        return self.p("analysis")

    @property
    def slurm(self) -> str:
        return self.p("slurm")

    def require_prepared(self) -> dict:
        """The run's metadata; a readable error (not a traceback) when the directory is not a prepared run."""
        return self.run

    @cached_property
    def run(self) -> dict:
        if not os.path.exists(self.run_json):
            raise ConfigError(
                f"{self.path} is not a prepared run (no run.json); run `bash run_experiment.sh prepare` first "
                "(with the same RUN_NAME / RESULTS_ROOT)"
            )
        return read_run_json(self.run_json)

    @cached_property
    def shards(self) -> list[ShardSpec]:
        """The shards, their outputs and progress files inside this directory (wherever it is now)."""
        if self.run.get("kind") == "surface":  # a prediction-surface job (harness/surface/job.py): same machinery
            from .surface.job import SurfaceShard

            return [SurfaceShard.from_json(s).relative_to(self.path) for s in self.run["shards"]]
        return [ShardSpec.from_json(s).relative_to(self.path) for s in self.run["shards"]]

    def check_pool_unchanged(self) -> None:
        """Refuse (one line, before any shard runs) when a pool file changed since the run was prepared.

        Without it every shard would start, refuse the pool, and be retried
        until marked failed, ending in a bare "FAILED shards".
        """
        from .shard_runner import check_pool_sha256

        if self.run.get("kind") == "surface":
            cfg = self.run.get("config", {})
            pools = {(cfg.get("pool_path"), cfg.get("pool_sha256"))}
        else:
            pools = {(s.pool, s.pool_sha256) for s in self.shards}
        for path, sha in sorted(p for p in pools if p[0]):
            check_pool_sha256(path, sha or "")

    def job_lines(self) -> list[str]:
        try:
            with open(self.jobs_list, encoding="utf-8") as fh:
                return [line.rstrip("\n") for line in fh if line.strip()]
        except FileNotFoundError:
            raise ConfigError(f"{self.jobs_list} is missing; run `bash run_experiment.sh prepare` again") from None

    def shard(self, n: int) -> ShardSpec:
        if not (0 <= n < len(self.shards)):
            raise ConfigError(f"shard {n} does not exist (this run has shards 0..{len(self.shards) - 1})")
        return self.shards[n]
