"""Draw a subset of a CodeFlow-Comp file (or restore an exact one) and tag ``_source_index``.

Usage::

    python -m codeflow.comp.sample codeflowbench_comp_test.json --n 462 --seed 0 \\
        --out data/comp_462.json                      # also writes data/comp_462.indices.json
    python -m codeflow.comp.sample codeflowbench_comp_test.json \\
        --indices data/comp_462.indices.json --out data/comp_462.json   # the same subset again

With ``--n`` the problems are drawn without replacement by Python's
``random.Random(seed).sample`` over the positions and kept in file order.
With ``--indices`` (a JSON list, or an object with ``indices`` or
``source_indices``) exactly those positions are taken, in the file's order of
the list. Every selected problem gets ``_source_index`` = its position in
the input, which the loader (``dataset.py``) and the pool conversion use
as the problem's source index. The indices file written beside the subset is
``{"indices": [...], "n", "seed", "source"}``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from codeflow.dataset import read_json_list
from simulator.base import cliargs
from simulator.base.errors import UserError, cli_entry
from simulator.base.io_utils import atomic_write_json
from simulator.base.jsonread import load_json_file
from simulator.base.outputs import check_output_path

INDEX_KEYS = ("indices", "source_indices")


def read_indices(path: str | Path, n_items: int) -> list[int]:
    """A non-empty list of distinct positions in ``[0, n_items)`` from an indices file."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: indices file not found")
    data = load_json_file(path, what="indices file")
    if isinstance(data, dict):
        key = next((k for k in INDEX_KEYS if k in data), None)
        if key is None:
            raise UserError(f"{path}: indices file needs a list or one of the keys "
                            f"{list(INDEX_KEYS)}")
        data = data[key]
    if not isinstance(data, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                             for i in data):
        raise UserError(f"{path}: the indices must be a list of integers")
    if not data:
        raise UserError(f"{path}: the indices file selects no problem")
    if len(set(data)) != len(data):
        raise UserError(f"{path}: an index is listed twice")
    bad = next((i for i in data if not 0 <= i < n_items), None)
    if bad is not None:
        raise UserError(f"{path}: index {bad} is out of range (the input has {n_items} problems)")
    return list(data)


def draw(n_items: int, n: int, seed: int) -> list[int]:
    """``n`` distinct positions of ``n_items``, seeded, in increasing order."""
    if not 1 <= n <= n_items:
        raise UserError(f"--n must be between 1 and the number of problems ({n_items}), got {n}")
    return sorted(random.Random(seed).sample(range(n_items), n))


def select(items: list[Any], indices: list[int], source: str) -> list[dict[str, Any]]:
    out = []
    for i in indices:
        if not isinstance(items[i], dict):
            raise UserError(f"{source}: problem #{i} is not an object")
        out.append({**items[i], "_source_index": i})
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = cliargs.ArgumentParser(
        prog="python -m codeflow.comp.sample",
        description="Draw n problems of a CodeFlow-Comp file with a seed, or restore an exact "
                    "subset from an indices file; tags each with _source_index.")
    ap.add_argument("input", type=cliargs.input_path(), help="Comp file (JSON list of problems)")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--n", type=int, help="number of problems to draw")
    how.add_argument("--indices", type=cliargs.input_path(), help="indices file of the subset to restore")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draw, an integer >= 0 (default 0)")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, help="subset file to write (JSON list)")
    ap.add_argument("--indices-out", type=cliargs.output_path(), default=None,
                    help="indices file to write (default: <out stem>.indices.json)")
    return ap.parse_args(argv)


@cli_entry
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.seed < 0:  # random.Random(-5) draws what Random(5) draws: a negative seed would be recorded falsely
        raise UserError(f"--seed must be an integer >= 0, got {args.seed}")
    # outputs checked before any work: never the input (or the indices file read), never each other
    out = Path(args.out)
    index_out = Path(args.indices_out) if args.indices_out else out.with_suffix(".indices.json")
    inputs = (args.input, args.indices)
    check_output_path(out, inputs=inputs, flag="--out")
    check_output_path(index_out, inputs=(*inputs, out), flag="--indices-out")
    items = read_json_list(args.input, "Comp file")
    if not items:
        raise UserError(f"{args.input}: the file holds no problem")
    if args.indices:
        indices = read_indices(args.indices, len(items))
    else:
        indices = draw(len(items), args.n, args.seed)
    subset = select(items, indices, args.input)
    atomic_write_json(out, subset, indent=None)
    atomic_write_json(index_out, {"indices": indices, "n": len(indices),
                                  "seed": None if args.indices else args.seed,
                                  "source": str(args.input)})
    print(f"wrote {len(subset)} of {len(items)} problems to {out}; indices in {index_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
