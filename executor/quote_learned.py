"""What a quote's interval leaves out when the pool was learned from traces.

A quote treats the pool as the truth: its 95% interval is the binomial
noise of the simulated episodes at the quoted budget, nothing else. A pool
learned by ``poolbuild.from_traces`` is itself a sample (a few dozen
observations per (node, model) pair), and near the target the on-time rate
climbs steeply with the budget, so the pool's own sampling error is usually
the larger part of the quote's error: on the example workflow, 30
observations per pair, the realised rate at a budget quoted for 0.8 ranged
over about 0.6-0.95 between explorations (``docs/workflows.md``, "What a
quote from a learned pool covers"; measured in ``benchmarks/README.md``).
The quote says so in one line, with the pool's observation counts, rather
than let the narrow interval pass for the whole error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def learned_note(raw: Mapping[str, Any]) -> str | None:
    """The note for a learned pool line (one with a ``learned`` object), None for any other line."""
    learned = raw.get("learned")
    if not isinstance(learned, Mapping):
        return None
    counts = [int(meta.get("live_rows", 0) or 0) for n in raw.get("nodes") or []
              for meta in (n.get("model_node_metadata") or {}).values() if isinstance(meta, Mapping)]
    live = [c for c in counts if c > 0]
    traces = learned.get("traces") or []
    said = (f"{min(live)}-{max(live)} live observations per (node, model) pair over {len(live)} pairs"
            if live else "no live observations (prior rows only)")
    return (f"note: this pool was learned from {len(traces)} trace(s), {said}; the interval below covers the "
            f"simulated episodes' noise only, not the pool's own sampling error, which at a few dozen observations "
            f"per pair is usually larger (docs/workflows.md, \"What a quote from a learned pool covers\")")
