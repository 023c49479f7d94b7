"""Numba's cache is keyed by the whole package (simulator/base/jitcache.py): a changed callee is never run stale."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from simulator.base import jitcache
from simulator.base.sources import package_digest

ROOT = Path(__file__).resolve().parents[1]

CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef k():\n    return {value}\n"
CALLER = "from numba import njit\n\nfrom {pkg}.b import k\n\n\n@njit(cache=True)\ndef f():\n    return k() + 100\n"


def _package(tmp_path: Path, name: str, keyed: bool) -> Path:
    pkg = tmp_path / name
    pkg.mkdir()
    init = "import os\n\nfrom simulator.base import jitcache\n\njitcache.install(os.path.dirname(__file__))\n"
    (pkg / "__init__.py").write_text(init if keyed else "")
    (pkg / "b.py").write_text(CALLEE.format(value=1))
    (pkg / "a.py").write_text(CALLER.format(pkg=name))
    return pkg


def _call(tmp_path: Path, name: str) -> int:
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env.pop("NUMBA_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-c", f"from {name}.a import f; print(f())"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def test_a_changed_callee_is_recompiled_into_its_callers(tmp_path):
    for name, keyed in (("plain", False), ("keyed", True)):
        pkg = _package(tmp_path, name, keyed)
        assert _call(tmp_path, name) == 101  # compiled, cached
        assert _call(tmp_path, name) == 101  # from the cache
        (pkg / "b.py").write_text(CALLEE.format(value=2))
        got = _call(tmp_path, name)
        if keyed:
            assert got == 102  # the package changed: every kernel of it recompiled
        else:
            assert got == 101  # numba's own key: the caller's entry still holds the old callee (the hazard)
    assert list((tmp_path / "keyed" / "__pycache__").glob("a.f-*.nbi"))  # it is still a cache


def test_the_simulators_kernels_use_the_package_key():
    from simulator.baselines.compiled import trial_range
    from simulator.engine.loop import new_state
    from simulator.mcpp.kernel import run_pairs_serial

    for kernel in (new_state, trial_range, run_pairs_serial):
        assert isinstance(kernel._cache._impl.locator, jitcache.LOCATORS), kernel
    digest = package_digest(str(ROOT / "simulator"))
    assert new_state._cache._impl.locator.get_source_stamp() == digest and len(digest) == 32


def test_every_kernel_module_takes_njit_from_simulator_base_jit():
    """numba picks a kernel's locator when its decorator runs: a module that imports ``njit`` from numba itself
    could be decorated before the package key is installed."""
    offenders = []
    for path in (ROOT / "simulator").rglob("*.py"):
        if path.name in ("jit.py", "jitcache.py") and path.parent.name == "base":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "numba" and any(
                a.name in ("njit", "jit") for a in node.names
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("njit", "jit") and getattr(
                node.value, "id", None
            ) == "numba":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
