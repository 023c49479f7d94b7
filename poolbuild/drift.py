"""Has a (node, model) drifted from its pool? Recent observations tested against the pool's statistics.

Two tests per pair with at least :data:`MIN_OBS` recent complete attempts:

* **success**: the exact two-sided binomial test (computed here, without scipy) of S successes in n against
  the pool's rate p0 (its rows' mean, or the template's ``success_prob``);
* **latency**: the two-sided Mann-Whitney U test of the recent latencies
  against the pool's rows (a shift of the distribution, not only of its mean);
  against a template without rows, the z-test of the recent mean with the
  template's mean and spread.

A pair drifts when a p-value is below ``alpha`` divided by the number of tests
made (Bonferroni over every pair and both tests, so one run's many pairs do not
cry wolf: with nothing wrong, a report of drift has probability at most
``alpha``). Censored observations are left out of both tests (a test on them
alone would need their donors, which come from the same recent data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: recent complete attempts a pair needs before it is tested
MIN_OBS = 5
DEFAULT_ALPHA = 0.01


def binomial_p(k: int, n: int, p: float) -> float:
    """The exact two-sided binomial test's p-value: the probability of every count no likelier than ``k``
    (no scipy: a run's exit must not wait for its import)."""
    if p <= 0.0 or p >= 1.0:
        return 1.0 if k == round(p * n) else 0.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
            for i in range(n + 1)]
    cut = logs[k] + 1e-7
    return float(min(1.0, sum(math.exp(x) for x in logs if x <= cut)))


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sided Mann-Whitney U test's p-value, normal approximation with the tie correction."""
    n1, n2 = len(a), len(b)
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both))
    sorted_vals = both[order]
    i = 0
    ties = 0.0
    while i < len(both):
        j = i
        while j + 1 < len(both) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def pair_stats(raw_line: Mapping[str, Any]) -> dict[tuple[int, str], tuple[float, np.ndarray, float, float]]:
    """Per (node id, model): (success rate, row latencies (maybe empty), template lat mean, lat std)."""
    out = {}
    for n in raw_line.get("nodes", []):
        v = int(n["node_id"])
        tmpls = n.get("model_templates") or ({"default": n["template"]} if n.get("template") else {})
        by_model = n.get("empirical_samples_by_model") or {}
        legacy = n.get("legacy_template_model") or "default"
        for m, t in tmpls.items():
            rows = by_model.get(m) or (n.get("empirical_samples") or [] if m in (legacy, "default") else [])
            lat = np.array([float(r["latency"]) for r in rows], dtype=float)
            p = float(np.mean([int(r["success"]) for r in rows])) if rows else float(t.get("success_prob", 0.0))
            out[(v, str(m))] = (p, lat, float(t.get("lat_mean", math.nan)), float(t.get("lat_std", 0.0) or 0.0))
    return out


def drift(raw_line: Mapping[str, Any], recent: Sequence[tuple[int, str, float, int]],
          alpha: float = DEFAULT_ALPHA) -> list[str]:
    """One line per drifting (node, model); ``recent``: (node id, model, latency, success) of complete attempts."""
    pool = pair_stats(raw_line)
    by_pair: dict[tuple[int, str], list[tuple[float, int]]] = {}
    for v, m, lat, ok in recent:
        by_pair.setdefault((int(v), str(m)), []).append((float(lat), int(ok)))
    tests = []
    tested = [(pair, xs) for pair, xs in sorted(by_pair.items()) if len(xs) >= MIN_OBS and pair in pool]
    if not tested:
        return []
    for pair, xs in tested:
        p0, rows, mu, sd = pool[pair]
        lat = np.array([x[0] for x in xs])
        wins = sum(x[1] for x in xs)
        p_succ = binomial_p(wins, len(xs), min(max(p0, 0.0), 1.0))
        if len(rows) >= 2:
            p_lat = mann_whitney_p(lat, rows)
        elif sd > 0 and math.isfinite(mu):
            z = (lat.mean() - mu) / (sd / math.sqrt(len(lat)))
            p_lat = math.erfc(abs(z) / math.sqrt(2))
        else:
            p_lat = 1.0
        tests.append((pair, len(xs), wins, p0, p_succ, float(lat.mean()), float(rows.mean()) if len(rows) else mu,
                      p_lat))
    k = 2 * len(tests)
    lines = []
    for (v, m), n, wins, p0, p_succ, lat_now, lat_pool, p_lat in tests:
        if p_succ < alpha / k:
            lines.append(f"drift: node {v} model {m}: success {wins}/{n} against the pool's {p0:.3f} (exact binomial "
                         f"test p = {p_succ:.2g} < {alpha:g}/{k})")
        if p_lat < alpha / k:
            lines.append(f"drift: node {v} model {m}: latency mean {lat_now:.4g} s against the pool's {lat_pool:.4g} s "
                         f"(Mann-Whitney p = {p_lat:.2g} < {alpha:g}/{k})")
    return lines
