#!/usr/bin/env python3
"""Run one shard of a prepared run (the command of one line of jobs_list.txt).

Every setting is a flag (the job line is self-contained; the environment is
never read). Per-DAG outputs are written atomically; DAGs whose output
already verifies are skipped, truncated or partial ones are redone.
See docs/harness.md.
"""

import sys

from harness.cli_util import run_cli
from harness.shard_runner import run_shard
from harness.shards import add_shard_arguments, spec_from_args
from simulator.base import cliargs


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(
        prog="run_shard.py",
        description="Simulate one shard: a budget group (budget + its deadlines) x a DAG slice x all "
        "trials x all methods; writes <out-dir>/<group>/dag_<row>.jsonl per DAG.",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--surface"]:  # a shard of a prediction-surface job (harness/surface/job.py)
        from harness.surface.job import surface_shard_main

        return surface_shard_main(argv[1:])
    add_shard_arguments(ap)
    return run_cli(lambda: run_shard(spec_from_args(ap.parse_args(argv))) and 0)


if __name__ == "__main__":
    from harness.cli_util import exit_now

    exit_now(main())
