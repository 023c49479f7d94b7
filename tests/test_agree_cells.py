"""``benchmarks/agree_cells.py``: the replications' summary counted by hand, and its refusals before any cell
runs (through its command line: the tests do not import the benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def agree_cells(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.agree_cells", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _cell(method, z_on_time, z_spend, live=0.5, sim=0.5):
    return {"method": method, "budget_ratio": "1", "deadline_ratio": "1", "live": live, "sim": sim,
            "z_on_time": z_on_time, "spend_live": 1.0, "spend_sim": 1.0, "z_spend": z_spend,
            "pass": abs(z_on_time) <= 2 and abs(z_spend) <= 2}  # fmt: skip


def _write(path, seed, cells):
    path.write_text(json.dumps({"runs": 400, "dag": "0", "seed": seed, "cells": cells}))


def test_summary_counts_by_hand(tmp_path):
    mcpp, seq = "mc_portfolio_rollout", "sequential"
    _write(tmp_path / "results_agree_cells.json", 0, [_cell(mcpp, 0.5, -2.5), _cell(seq, 1.0, 0.0),
                                                       _cell(seq, 0.0, 0.0, live=0.0, sim=0.0)])  # fmt: skip
    _write(tmp_path / "results_agree_cells_seed12.json", 12, [_cell(seq, -3.0, 1.0)])
    _write(tmp_path / "results_agree_cells_seed2.json", 2, [_cell(seq, 0.0, 0.5)])
    r = agree_cells("--summary", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.index("| 2 | 1 | 1 |") < text.index("| 12 | 1 | 0 |")  # seeds in numeric order
    assert "| 0 | 3 | 2 |" in text
    # the both-zero cell's on-time z is left out (no spread to compare); its spend z counts
    assert "| sequential | on time | 3 | 1 (33.3%) | -0.67 | 2.08 |" in text
    assert "| sequential | spend | 4 | 0 (0.0%) | +0.38 | 0.48 |" in text
    assert "| mc_portfolio_rollout | spend | 1 | 1 (100.0%) | -2.50 | - |" in text
    assert "all: 2 of 9 comparisons beyond 2 SE" in text
    assert "every cell of all methods within 2 SE: 0 of 1 replications" in text  # only seed 0 has MCPP cells
    assert "every cell of the baselines within 2 SE: 2 of 3 replications" in text


def test_replication_means_and_twins_by_hand(tmp_path):
    """The mean on-time z per replication, its mean and SE over replications, and the twin check, by hand."""
    seq = "sequential"
    live, twins = tmp_path / "live", tmp_path / "twins"
    live.mkdir()
    twins.mkdir()
    both_zero = {**_cell(seq, 0.0, 0.0, live=0.0, sim=0.0), "budget_ratio": "0.5"}  # no twin on disk: not counted
    _write(live / "results_agree_cells.json", 0, [_cell(seq, 1.0, 0.0), both_zero])
    _write(live / "results_agree_cells_seed1.json", 1, [_cell(seq, -2.0, 0.0, live=0.25)])
    _write(twins / "results_agree_cells.json", 0, [_cell(seq, 1.0, 0.0)])  # equal to the live cell
    _write(twins / "results_agree_cells_seed1.json", 1, [_cell(seq, -2.0, 0.0, live=0.2500001)])  # not equal
    r = agree_cells("--summary", "--results", str(live), "--twins", str(twins))
    assert r.returncode == 0, r.stderr
    # replication means: seed 0 +1.0 (the both-zero cell left out), seed 1 -2.0: mean -0.5, SE 1.5; even seeds: 0
    assert "| sequential | 2 | -0.50 | 1.50 | +1.00 +- - (1) |" in r.stdout
    assert "sequential: 1 of 2 live cells equal their simulated twin's" in r.stdout
    # the same seeds before: seed 1's live rate went from 0.30 to 0.25 (z from -1 to -2), seed 0's stayed
    before = tmp_path / "before"
    before.mkdir()
    _write(before / "results_agree_cells.json", 0, [_cell(seq, 1.0, 0.0)])
    _write(before / "results_agree_cells_seed1.json", 1, [_cell(seq, -1.0, 0.0, live=0.30)])
    r = agree_cells("--summary", "--results", str(live), "--before", str(before))
    assert r.returncode == 0, r.stderr
    assert (f"sequential: 2 cells paired with {before}: live on-time rate up in 0, the same in 1, down in 1; "
            "mean change -0.0250, of the on-time z -0.500") in r.stdout  # fmt: skip


@pytest.mark.parametrize("argv, says", [
    (["--methods", "nope"], "unknown method(s) 'nope'"),
    (["--spread", "uniform", "x", "1"], "--spread BUDGET_RATIO (flag): expected a finite number > 0, got 'x'"),
    (["--spread", "uniform", "1", "1", "--seeds", "1"], "--seeds (flag): expected an integer >= 2, got '1'"),
    (["--runs", "abc"], "--runs (flag): expected an integer >= 2, got 'abc'"),
    (["--dag", "99", "--out", "{out}"], "--dag 99 does not exist (the pool has 24 DAGs)"),
])
def test_bad_options_are_one_line_before_any_cell(argv, says, tmp_path):
    out = tmp_path / "cells.json"
    r = agree_cells(*[a.format(out=out) for a in argv])
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_baseline_twin_is_the_simulation_at_the_worlds_seed(tmp_path):
    """``sequential`` plans draw nothing, so replication 0's twin (planner seed 0, draws seed 1) is replication 1's
    simulated side (seed 1) cell by cell; a twin with its own seed back would not be (the draws differ)."""
    out = tmp_path / "twins"
    r = agree_cells("--twin-out", str(out), "--seed", "0", "--seeds", "2", "--runs", "30", "--methods", "sequential")
    assert r.returncode == 0, r.stderr
    rep0 = json.loads((out / "results_agree_cells.json").read_text())["cells"]
    rep1 = json.loads((out / "results_agree_cells_seed1.json").read_text())["cells"]
    assert len(rep0) == len(rep1) == 9
    for a, b in zip(rep0, rep1, strict=True):
        assert (a["budget_ratio"], a["deadline_ratio"]) == (b["budget_ratio"], b["deadline_ratio"])
        assert (a["live"], a["spend_live"]) == (b["sim"], b["spend_sim"])
    assert any(a["spend_live"] != a["spend_sim"] for a in rep0)  # the twin is not the seed's own simulation


def test_planner_key_effect_by_hand(tmp_path):
    """Twins on disk: replication s's live side against replication s + 1's simulated side, cell by cell."""
    mcpp = "mc_portfolio_rollout"
    for seed, cells in ((0, [_cell(mcpp, 0.0, 0.0, live=0.90, sim=0.95)]), (1, [_cell(mcpp, 0.0, 0.0, live=0.93, sim=0.92)]),
                        (2, [_cell(mcpp, 0.0, 0.0, live=0.5, sim=0.93)])):  # fmt: skip
        name = "results_agree_cells.json" if seed == 0 else f"results_agree_cells_seed{seed}.json"
        (tmp_path / name).write_text(json.dumps({"runs": 400, "dag": "0", "seed": seed, "twin": True, "cells": cells}))
    r = agree_cells("--summary", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    # pairs (0, 1): 0.90 - 0.92 = -0.02; (1, 2): 0.93 - 0.93 = 0: mean -0.01, SE 0.01
    assert ("mc_portfolio_rollout: planner key s vs s + 1 on the same draws, 2 replication pairs: on-time "
            "difference -0.0100 (SE 0.0100); cells lower 1, equal 1, higher 0") in r.stdout  # fmt: skip
