"""Numba's on-disk cache, keyed by the whole package's sources.

Numba keys a cached kernel by its own source file only. A kernel that calls
a kernel of another module (or reads a constant of another module) has that
callee compiled into its own cache entry, so after the callee's module
changes (a ``git pull``, a branch switch, an edit) the caller's entry is
still taken as fresh: it runs the old callee. When the change touched a
layout (a state array's row count, a reservation rule), the old and new code
meet in one process and write past each other's arrays. This was seen: a
``loop.py`` edit left a baselines entry with the old ``reset_state`` and
every shard running a baseline and then MCPP died of a segmentation fault.

The locators below keep numba's own places (``NUMBA_CACHE_DIR``, else the
``__pycache__`` beside the sources, else the user-wide cache) and change only
the freshness stamp: the digest of every ``.py`` file of the registered
package (paths and contents). Any change to the package recompiles each
kernel once, on its next use; nothing stale is ever loaded. The digest is
computed once per process (about 600 KB of sources; a few milliseconds;
:mod:`simulator.base.sources`).

Numba's list of locator classes is an internal of numba (pinned in
``requirements.txt``); ``tests/test_jitcache.py`` checks that the simulator's
kernels use these locators and that a changed callee is recompiled.
"""

from __future__ import annotations

import os

from numba.core import caching

from simulator.base.sources import package_digest

_ROOTS: list[str] = []


def _root_of(py_file: str) -> str | None:
    path = os.path.abspath(py_file)
    for root in _ROOTS:
        if path.startswith(root + os.sep):
            return root
    return None


class _PackageStamp:
    """Mixin: a kernel of a registered package is fresh only if the whole package is unchanged."""

    _package_root: str

    def get_source_stamp(self) -> bytes:
        return package_digest(self._package_root)

    @classmethod
    def from_function(cls, py_func, py_file):
        root = _root_of(py_file)
        if root is None:
            return None
        locator = super().from_function(py_func, py_file)
        if locator is not None:
            locator._package_root = root
        return locator


class PackageUserProvidedLocator(_PackageStamp, caching.UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR`` set: numba's place, the package's stamp."""


class PackageInTreeLocator(_PackageStamp, caching.InTreeCacheLocator):
    """``__pycache__`` beside the sources: numba's place, the package's stamp."""


class PackageUserWideLocator(_PackageStamp, caching.UserWideCacheLocator):
    """A read-only checkout: the user-wide cache, the package's stamp."""


LOCATORS = (PackageUserProvidedLocator, PackageInTreeLocator, PackageUserWideLocator)


def install(root: str) -> None:
    """Key the cached kernels of the package at ``root`` by its whole sources (idempotent).

    Must run before the package's first ``@njit(cache=True)`` decorator:
    numba picks a kernel's locator when the decorator runs.
    """
    root = os.path.abspath(root)
    if root not in _ROOTS:
        _ROOTS.append(root)
    classes = caching.CacheImpl._locator_classes
    for cls in reversed(LOCATORS):
        if cls not in classes:
            classes.insert(0, cls)


__all__ = ["LOCATORS", "install"]
