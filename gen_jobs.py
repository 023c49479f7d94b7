#!/usr/bin/env python3
"""Validate the harness settings, expand the grid, write jobs_list.txt and run.json.

The same as `bash run_experiment.sh prepare`; settings are the environment
variables of docs/harness.md. The grid expansion itself lives in
harness/grid.py (imported by everything that needs it).
"""

import sys

from harness.prepare import main_prepare

if __name__ == "__main__":
    sys.exit(main_prepare())
