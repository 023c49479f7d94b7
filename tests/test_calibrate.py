"""``python -m simulator calibrate``: MCPP's first-decision estimates against the realized on-time rate."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from simulator.base.errors import ConfigError
from simulator.cli.calibrate import _dags, ece, reliability
from tests.executor_helpers import POOL, ROOT


def test_ece_by_hand():
    est = np.array([0.05, 0.15, 0.15, 0.95])
    real = np.array([0.0, 0.3, 0.1, 0.9])
    # bins 0.0-0.1: |0.05 - 0| x 1/4; 0.1-0.2: |0.15 - 0.2| x 2/4; 0.9-1.0: |0.95 - 0.9| x 1/4
    assert ece(est, real) == pytest.approx(0.05 / 4 + 0.05 * 2 / 4 + 0.05 / 4)
    rows = reliability(est, real)
    assert [r["cells"] for r in rows] == [1, 2, 1] and rows[1]["realized"] == pytest.approx(0.2)
    assert ece(np.array([1.0]), np.array([1.0])) == 0.0  # an estimate of 1 is in the last bin


def test_dags_flag():
    assert _dags("0,2,4-6", 10) == [0, 2, 4, 5, 6] and _dags(None, 3) == [0, 1, 2]
    for bad in ("5-2", "0,0", "x", "0-10"):
        with pytest.raises(ConfigError):
            _dags(bad, 10)


def test_calibrate_reports_cells_reliability_ece_and_a_plot(tmp_path):
    png = tmp_path / "rel.png"
    cmd = [sys.executable, "-m", "simulator", "calibrate", "--pool", POOL, "--dags", "0-1", "--budget-ratios", "0.5",
           "1", "--deadline-ratios", "1", "--trials", "12", "--mc-portfolio-m", "8", "--plot", str(png)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("ECE raw: ") and "  calibrated: " in last
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rj = subprocess.run([*cmd[:-2], "--json", "--workers", "2"], cwd=ROOT, capture_output=True, text=True,
                        timeout=300)
    rep = json.loads(rj.stdout)
    r1 = subprocess.run([*cmd[:-2], "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert json.loads(r1.stdout) == rep  # one worker or two: every draw is keyed, the report is the same
    assert len(rep["cells"]) == 4 and all(0 <= c["realized"] <= 1 and 0 <= c["calibrated"] <= 1 for c in rep["cells"])
    assert all(0 <= c["raw"] <= 1 for c in rep["cells"])
    assert rep["ece_raw"] == pytest.approx(float(last.split()[2]), abs=1e-4)
    bad = subprocess.run([*cmd[:6], "--budget-ratios", "1", "--deadline-ratios", "1", "--method", "sequential"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    for flag, value in (("--workers", "0"), ("--trials", "-3"), ("--workers", "two")):
        r = subprocess.run([*cmd[:6], "--budget-ratios", "1", "--deadline-ratios", "1", flag, value], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and flag in r.stderr, r.stderr
    # a model no DAG has: refused before the first cell, naming the DAG and its line (no progress bar drawn)
    r = subprocess.run([*cmd[:6], "--budget-ratios", "1", "--deadline-ratios", "1", "--mc-portfolio-model-ids",
                        "nosuch"], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "'nosuch'" in r.stderr and "line 1" in r.stderr, r.stderr
