#!/usr/bin/env python3
"""Build a DAG pool (JSONL) from verified rollout records of one model.

A thin entry point: the code is ``poolbuild/build_loader.py`` (also installed
as the console command ``build-loader-pool``); see docs/data_pipeline.md.
"""

from poolbuild.build_loader import main

if __name__ == "__main__":
    raise SystemExit(main())
