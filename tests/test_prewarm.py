"""The cold-start helper (simulator/base/prewarm.py).

What the helper compiles must be what a run loads (same signatures: a run
on the helper's cache compiles none of the group's kernels), a run with the
helper prints exactly what a run without it prints, and the cache hook waits
for the helper's entry, passes numba's literal first try through, and gives
up when the helper is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simulator.base import prewarm
from simulator.base.sources import package_digest
from simulator.cli import prewarm_groups
from tests.harness_util import ROOT

SIMULATE = ["simulate", "--pool", "examples/example_pool.jsonl", "--dag", "0", "--budget-ratio", "1",
            "--deadline-ratio", "1", "--json"]  # fmt: skip

#: a run that prints, as its last line, the names of the functions it compiled (numba's compile events)
LISTEN = r"""
import json, sys
from numba.core import event
names = []
class L(event.Listener):
    def on_start(self, ev):
        names.append(ev.data["dispatcher"].py_func.__module__ + "." + ev.data["dispatcher"].py_func.__name__)
    def on_end(self, ev):
        pass
event.register("numba:compile", L())
from simulator.cli.main import main
code = main(sys.argv[1:])
print(json.dumps(names))
sys.exit(code)
"""


def _env(cache, prewarm_on: bool) -> dict:
    return {**os.environ, "NUMBA_CACHE_DIR": str(cache), "SIMULATOR_PREWARM": "1" if prewarm_on else "0",
            "PYTHONPATH": ROOT}  # fmt: skip


def _kernel_names(group: str) -> set[str]:
    return {k.py_func.__module__ + "." + k.py_func.__name__ for k in prewarm_groups.waited_kernels(group)}


@pytest.mark.slow
@pytest.mark.parametrize("method,trials,group", [("sequential", "3", "baseline"),
                                                 ("mc_portfolio_rollout", "1", "mcpp")])  # fmt: skip
def test_helper_compiles_what_the_run_loads_and_results_are_unchanged(tmp_path, method, trials, group):
    argv = [*SIMULATE, "--method", method, "--trials", trials]
    helped = tmp_path / "helped"
    helper = [sys.executable, "-m", "simulator", prewarm_groups.COMMAND, *argv[1:]]
    subprocess.run(helper, cwd=ROOT, env=_env(helped, False), check=True, timeout=300)
    run = subprocess.run([sys.executable, "-c", LISTEN, *argv], cwd=ROOT, env=_env(helped, False),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    *out, compiled = run.stdout.strip().splitlines()
    compiled = set(json.loads(compiled))
    assert compiled, "the run compiled nothing: the helper compiled more than its group"
    assert not compiled & _kernel_names(group), "a kernel the helper compiled was compiled again (signature mismatch)"
    plain = json.loads("\n".join(out))

    cold = subprocess.run([sys.executable, "-m", "simulator", *argv], cwd=ROOT, env=_env(tmp_path / "cold", True),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout) == plain


class _FakeCache:
    def __init__(self, found_after: int) -> None:
        self.calls = 0
        self.found_after = found_after

    def load_overload(self, sig, target_context):
        self.calls += 1
        return "entry" if self.calls > self.found_after else None


class _FakeDispatcher:
    def __init__(self, found_after: int) -> None:
        self._cache = _FakeCache(found_after)


@pytest.fixture
def fake_helper(monkeypatch):
    """A 'helper' that runs (sleeps) until the test ends."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    monkeypatch.setattr(prewarm, "_helper", proc)
    yield proc
    proc.kill()
    proc.wait()


def test_hook_waits_for_the_entry_then_steps_aside(fake_helper):
    from numba.core import types

    d = _FakeDispatcher(found_after=3)
    original = d._cache.load_overload
    prewarm._wait_hook(d)
    assert d._cache.load_overload(((types.literal(True)),), None) is None  # the literal try: not waited for
    sig = (types.int64,)
    assert d._cache.load_overload(sig, None) == "entry"  # polled until the helper's entry appeared
    assert d._cache.calls == 4
    assert d._cache.load_overload == original  # one wait per kernel


def test_hook_gives_up_when_the_helper_is_gone(monkeypatch):
    from numba.core import types

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    monkeypatch.setattr(prewarm, "_helper", proc)
    d = _FakeDispatcher(found_after=10**9)
    prewarm._wait_hook(d)
    t = time.monotonic()
    assert d._cache.load_overload((types.int64,), None) is None  # compiled here instead
    assert time.monotonic() - t < 5


def _launched(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(prewarm, "launch", lambda argv: calls.append(list(argv)))
    return calls


def test_no_helper_when_switched_off_or_not_simulate(monkeypatch, tmp_path):
    calls = _launched(monkeypatch)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # an empty cache
    monkeypatch.setattr(prewarm, "_usable_cpus", lambda: 2)
    monkeypatch.setenv("SIMULATOR_PREWARM", "0")
    prewarm_groups.start(SIMULATE)
    monkeypatch.setenv("SIMULATOR_PREWARM", "1")
    prewarm_groups.start(["validate", "--pool", "x"])
    prewarm_groups.start(["simulate", "--help"])
    monkeypatch.setattr(prewarm, "_usable_cpus", lambda: 1)
    prewarm_groups.start(SIMULATE)
    assert calls == []
    monkeypatch.setattr(prewarm, "_usable_cpus", lambda: 2)
    prewarm_groups.start(SIMULATE)
    assert calls == [[prewarm_groups.COMMAND, *SIMULATE[1:]]]


def test_no_helper_on_a_warm_cache(monkeypatch, tmp_path):
    calls = _launched(monkeypatch)
    monkeypatch.setattr(prewarm, "_usable_cpus", lambda: 2)
    monkeypatch.setenv("SIMULATOR_PREWARM", "1")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not prewarm.cache_has(prewarm_groups.KERNEL_FILES)
    for stem in prewarm_groups.KERNEL_FILES:  # another checkout's entries (same NUMBA_CACHE_DIR) do not count
        other = tmp_path / f"{stem.rpartition('/')[0].rpartition('/')[2]}_0123abcd"
        other.mkdir(exist_ok=True)
        (other / f"{stem.rpartition('/')[2]}-1.py311.nbi").write_bytes(b"")
    assert not prewarm.cache_has(prewarm_groups.KERNEL_FILES)
    assert Path(prewarm.cache_dir()).parent == tmp_path and Path(prewarm.cache_dir()).name.startswith("simulator_")
    stamp = package_digest(prewarm._HERE)
    for stem in prewarm_groups.KERNEL_FILES:
        package, _, name = stem.rpartition("/")
        sub = Path(prewarm.cache_dir(package))
        assert sub.parent == tmp_path and sub.name.startswith(package.rpartition("/")[2] + "_")
        sub.mkdir(exist_ok=True)
        (sub / f"{name}-1.py311.nbi").write_bytes(b"0.68.1 index of older sources")
    assert not prewarm.cache_has(prewarm_groups.KERNEL_FILES)  # left by older sources (a git pull): cold
    for stem in prewarm_groups.KERNEL_FILES:
        package, _, name = stem.rpartition("/")
        (Path(prewarm.cache_dir(package)) / f"{name}-1.py311.nbi").write_bytes(b"index " + stamp + b" overloads")
    assert prewarm.cache_has(prewarm_groups.KERNEL_FILES)
    prewarm_groups.start([*SIMULATE, "--method", "sequential"])
    assert calls == []


def test_cache_dir_is_numbas(monkeypatch, tmp_path):
    """The directory numba's own locator picks, for the package and a subpackage, with and without NUMBA_CACHE_DIR."""
    from numba.core.caching import _CacheLocator

    import simulator
    import simulator.baselines.further.loader as loader
    import simulator.engine.loop as loop

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    for package, src in (("", simulator.__file__), ("engine", loop.__file__), ("baselines/further", loader.__file__)):
        assert prewarm.cache_dir(package) == os.path.join(str(tmp_path), _CacheLocator.get_suitable_cache_subpath(src))
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    assert prewarm.cache_dir("baselines/further") == os.path.join(
        os.path.dirname(os.path.abspath(loader.__file__)), "__pycache__"
    )


def test_no_wait_without_a_helper(monkeypatch):
    monkeypatch.setattr(prewarm, "_helper", None)
    d = _FakeDispatcher(found_after=10**9)
    original = d._cache.load_overload
    with prewarm.attached([d]):
        assert d._cache.load_overload == original  # nothing hooked


def test_kernel_files_name_every_waited_kernel():
    stems = {s for g in ("baseline", "mcpp") for s in prewarm_groups._stems(prewarm_groups.waited_kernels(g))}
    assert stems == set(prewarm_groups.KERNEL_FILES)
