#!/usr/bin/env python3
"""Align several models' rollouts (or single-model pools) into comparable DAG pools.

A thin entry point: the code is ``poolbuild/build_aligned.py`` (also installed
as the console command ``build-aligned-pools``); see docs/data_pipeline.md.
"""

from poolbuild.build_aligned import main

if __name__ == "__main__":
    raise SystemExit(main())
