#!/usr/bin/env python3
"""Digests of a finished run: its records, tables, report and figures, timing aside (before/after checks).

    python -m benchmarks.run_digest RUN_DIR [RUN_DIR ...]

For each run directory (after ``local`` or ``merge`` + ``analyze``):

* ``records``: SHA-256 of the merged records (``merged/cells/*/records.jsonl``
  in cell order), each without its timing fields (the rule of
  ``bench_grid.records``: keys containing ``wall``, ending in ``_ms``,
  ``host``, ``timestamp``), as ``json.dumps(record, sort_keys=True)`` per line;
  README command 1 gives ``c2d3077564d6...``;
* ``tables``: SHA-256 (12 hex) of each ``analysis/*.csv`` without its planner
  and wall-time columns (re-written by pandas), of ``main_table.tex`` and of
  ``report.md`` with the cells of its ``mean_planner_ms`` column emptied;
* ``figures``: SHA-256 (12 hex) of each PNG's decoded pixels (RGBA), and
  ``figures_sha256``, one digest over all of them; PDF / SVG files are listed.

With two or more runs it says whether all agree (exit 1 if not).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import sys


def _timing(key: str) -> bool:
    return "wall" in key or key.endswith("_ms") or key in ("host", "timestamp")


def records_digest(run: str) -> tuple[int, str]:
    h, n = hashlib.sha256(), 0
    for path in sorted(glob.glob(os.path.join(run, "merged", "cells", "*", "records.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                r = {k: v for k, v in json.loads(line).items() if not _timing(k)}
                h.update(json.dumps(r, sort_keys=True).encode())
                n += 1
    return n, h.hexdigest()


def _report_without_planner_times(text: str) -> str:
    out, in_table = [], False
    for line in text.splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2 and "mean_planner_ms" in cells[-2]:
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        if in_table and len(cells) > 2:
            line = "|".join(cells[:-2] + [""])
        out.append(line)
    return "\n".join(out)


def tables_digest(run: str) -> dict[str, str]:
    import pandas as pd

    out = {}
    for path in sorted(glob.glob(os.path.join(run, "analysis", "*"))):
        name = os.path.basename(path)
        if name.endswith(".csv"):
            df = pd.read_csv(path)
            data = df[[c for c in df.columns if "planner" not in c and "wall" not in c]].to_csv(index=False).encode()
        elif name == "report.md":
            data = _report_without_planner_times(open(path, encoding="utf-8").read()).encode()
        elif name.endswith(".tex"):
            data = open(path, "rb").read()
        else:
            continue
        out[name] = hashlib.sha256(data).hexdigest()[:12]
    return out


def figures_digest(run: str) -> dict[str, str]:
    import numpy as np
    from PIL import Image

    out = {}
    for path in sorted(glob.glob(os.path.join(run, "analysis", "plots", "**", "*"), recursive=True)):
        if os.path.isfile(path):
            rel = os.path.relpath(path, os.path.join(run, "analysis", "plots"))
            if path.endswith(".png"):
                pixels = np.asarray(Image.open(path).convert("RGBA"))
                out[rel] = hashlib.sha256(pixels.tobytes()).hexdigest()[:12]
            else:
                out[rel] = "present"
    return out


def digest(run: str) -> dict:
    n, rec = records_digest(run)
    figs = figures_digest(run)
    pngs = {k: v for k, v in figs.items() if k.endswith(".png")}
    return {"records": n, "records_sha256": rec, "tables": tables_digest(run), "figures": figs,
            "figures_sha256": hashlib.sha256(json.dumps(pngs, sort_keys=True).encode()).hexdigest()[:12]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    runs = list(sys.argv[1:] if argv is None else argv)
    if not runs:
        print("usage: python -m benchmarks.run_digest RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        return 2
    for r in runs:
        if not os.path.isdir(os.path.join(r, "merged", "cells")):
            print(f"error: {r}: not a merged run directory (no merged/cells/)", file=sys.stderr)
            return 2
    res = {r: digest(r) for r in runs}
    print(json.dumps(res, indent=1))
    if len(runs) > 1:
        keys = ("records_sha256", "tables", "figures_sha256")
        same = all(all(res[r][k] == res[runs[0]][k] for k in keys) for r in runs[1:])
        print(f"records, tables and PNG pixels {'identical' if same else 'DIFFER'} across {len(runs)} runs")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
