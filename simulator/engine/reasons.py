"""The names of an episode's termination reasons (standard library only).

The same tuple as :data:`simulator.engine.loop.REASONS` (whose codes index it;
``tests/test_registry.py`` checks they agree), for readers of records that
need the names but not the event loop: the analysis reads them from here, so
its process never imports numba.
"""

from __future__ import annotations

REASONS = ("completed", "budget_exhausted", "deadline_exhausted", "stalled", "event_limit")
