#!/usr/bin/env python3
"""Merge a run's per-DAG outputs into per-cell record files with a coverage check.

Exits 1 naming the missing DAGs, trials and methods when anything is
missing. Works from any directory: the run is located by --run-dir (or
RUN_DIR, else $RESULTS_ROOT/$RUN_NAME). See docs/harness.md.
"""

import sys

from harness.cli import run_dir_from_env
from harness.cli_util import run_cli
from harness.merge import IncompleteRun, merge
from harness.rundir import RunDir
from simulator.base import cliargs


def main(argv=None) -> int:
    ap = cliargs.ArgumentParser(prog="merge_shards.py", description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=cliargs.output_path("dir"), help="run directory (default: RUN_DIR or $RESULTS_ROOT/$RUN_NAME)")

    def go():
        args = ap.parse_args(argv)
        rd = RunDir(args.run_dir) if args.run_dir else run_dir_from_env()
        try:
            merge(rd)
        except IncompleteRun as exc:
            print(str(exc), file=sys.stderr)
            return 1
        return 0

    return run_cli(go)


if __name__ == "__main__":
    sys.exit(main())
