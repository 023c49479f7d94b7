"""docs/workflows.md's commands, as written, in order (slow): workflow file, world, explore (twice: the rerun
finds the work done), learn, validate, quote, run --learn, summary, simulate."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from simulator.pools.pool import load_pool
from tests.executor_helpers import ENV, ROOT

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "workflows.md"


def commands() -> list[str]:
    block = next(b for b in re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
                 if "poolbuild.from_traces" in b)
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip() and not c.startswith("#")]


def test_the_documented_path_runs_as_written(tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "wf").mkdir()
    env = {**ENV, "PYTHONPATH": str(ROOT)}
    world = None
    outputs = []
    try:
        for line in commands():
            background = line.endswith("&")
            argv = shlex.split(line.rstrip("&").strip())
            assert argv[0] == "python", line
            argv[0] = sys.executable
            if background:
                world = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
                assert "loopback world on" in world.stdout.readline()
                continue
            r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
            outputs.append(r.stdout + r.stderr)
    finally:
        if world is not None:
            world.terminate()
            world.wait(10)
    explore1, explore2 = outputs[1], outputs[2]
    assert "every pair has 5 observations" in explore1 and "earlier runs" in explore2
    assert "every pair has 5 observations" in explore2 and explore2.count("explore: ") == 2  # nothing more to do
    line = load_pool(tmp_path / "wf" / "learned.jsonl").raw(0)
    assert f"holds {len(line['learned']['traces'])} traces" in outputs[6]
    assert all(m["live_rows"] >= 5 for n in line["nodes"] for m in n["model_node_metadata"].values())
