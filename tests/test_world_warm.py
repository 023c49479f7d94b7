"""The loopback world compiles its draw kernel before it listens (issue 41, item 9).

``python -m executor demo`` on a fresh clone (an empty numba cache) ended
both methods ``deadline_exhausted``: the in-process world compiled its draw
kernel on the event loop the runs share at the first request (first draw
2.3 s, the second 6e-05 s). The world now warms itself in ``start``: in a
fresh interpreter with an empty numba cache, the kernel has its compiled
version once ``start`` returns, and the first request's draw is fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.executor_helpers import POOL, ROOT

CODE = f"""
import asyncio, json, time
from executor.inputs import load_dag
from executor.world import World
from simulator.engine.loop import draw_attempt

async def go():
    pool, dag = load_dag({str(POOL)!r}, 0)
    world = World(pool, seed=1)
    before = len(draw_attempt.signatures)
    await world.start()
    after = len(draw_attempt.signatures)
    t0 = time.perf_counter()
    world.draw(0, 0, 0, 0, 1)
    first = time.perf_counter() - t0
    await world.stop()
    print(json.dumps({{"before": before, "after": after, "first_draw_s": first, "warm_s": world.warm_s}}))

asyncio.run(go())
"""


@pytest.mark.slow
def test_the_world_compiles_its_draw_kernel_before_it_listens(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba_cache")}  # a fresh clone: nothing cached
    p = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["before"] == 0 and got["after"] >= 1, got
    # compiled before listening: what the first request pays is a call, not a compilation (seconds cold)
    assert got["first_draw_s"] < 0.25 * max(got["warm_s"], 1e-3) or got["first_draw_s"] < 0.05, got
