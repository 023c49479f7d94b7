"""The digest of a package's sources: the freshness stamp of its compiled kernels (standard library only).

:mod:`simulator.base.jitcache` stamps every cached kernel with it, and
:func:`simulator.base.prewarm.cache_has` looks for it in the cache's index
files without importing numba.
"""

from __future__ import annotations

import hashlib
import os

#: the ``simulator`` package's directory (absolute, symlinks kept, as numba names sources): its kernels' stamp
SIMULATOR_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_DIGESTS: dict[str, bytes] = {}


def package_digest(root: str) -> bytes:
    """sha256 over the relative path and the sha256 of every ``.py`` file under ``root`` (computed once)."""
    got = _DIGESTS.get(root)
    if got is None:
        h = hashlib.sha256()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, "rb") as f:
                        content = f.read()
                    h.update(os.path.relpath(path, root).encode() + b"\0" + hashlib.sha256(content).digest())
        got = _DIGESTS[root] = h.digest()
    return got


__all__ = ["SIMULATOR_DIR", "package_digest"]
