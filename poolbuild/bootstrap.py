"""A learned pool's own sampling error: a bootstrap over the runs it was learned from, and a quote's z.

A pool built by :mod:`poolbuild.from_traces` is a sample (a few dozen observations per (node, model) pair), so a
rate simulated on it has an error of its own beside the simulated episodes' binomial noise. The bootstrap here
resamples whole runs (a run's observations share its luck: its deadline, its cancellations), and
:func:`quote_z` compares a quote with live runs on the logit scale with that error included. Used by the
statistical gate (``benchmarks/learn_gate.py``; measured in ``benchmarks/README.md``).
"""

from __future__ import annotations

import math

import numpy as np

from poolbuild.from_traces import Obs


def resample_runs(obs: list[Obs], boot: int, seed: int) -> list[list[Obs]]:
    """``boot`` bootstrap resamples over runs: the traces drawn with replacement, each drawn copy's observations
    renamed (so its imputation draws are its own). The runs are numbered in the order they come (the trace
    files' sorted paths), not by their trace ids, which are random: sorted ids made every rerun draw other
    resamples."""
    by_trace: dict[str, list[Obs]] = {}
    for o in obs:
        by_trace.setdefault(o.key.split(":", 1)[0], []).append(o)
    ids = list(by_trace)
    rng = np.random.default_rng(seed)
    out = []
    for r in range(boot):
        pick = rng.integers(0, len(ids), len(ids))
        out.append([Obs(o.node, o.model, o.lat, o.lat_observed, o.tokens, o.tok_observed, o.success,
                        f"{o.key}#{r}.{i}", o.token_source) for i, t in enumerate(pick) for o in by_trace[ids[t]]])
    return out


def logit(rate: float, n: int) -> float:
    """The empirical logit of a rate of ``n`` episodes, log((k + 1/2) / (n - k + 1/2)) with k = rate n: finite at
    0 and 1."""
    k = rate * n
    return math.log((k + 0.5) / (n - k + 0.5))


def logit_var(rate: float, n: int) -> float:
    """The binomial variance of :func:`logit` (1/(k + 1/2) + 1/(n - k + 1/2), about 1 / (n p (1 - p)))."""
    k = rate * n
    return 1.0 / (k + 0.5) + 1.0 / (n - k + 0.5)


def quote_z(quoted: float, quote_trials: int, live: float, runs: int, boot_rates: list[float],
            boot_trials: int) -> dict[str, float]:
    """The quote check's z, on the logit scale: (logit(live) - logit(quoted)) / SE, SE^2 = the variance of the
    bootstrap rates' logits (the learned pool's own sampling error at the quoted budget) + the live runs' and
    the quote's binomial variances of a logit.

    Why the logit scale: the rate is bounded by 1, and a pool error moves the rate-against-budget curve
    sideways, which changes the rate by about (its slope) x (the shift): little near the top. A pool that is
    too optimistic puts the quote on the flat top, so the live rate falls further below a quote than it rises
    above it; on the logit scale the error is about symmetric. Measured over 30 explorations (z mean -0.12 on
    the logit scale, -0.24 on the rate scale, sd 1.07 and 1.03) and against pools drawn from the truth
    (``--oracle``): benchmarks/README.md."""
    lb = np.array([logit(r, boot_trials) for r in boot_rates])
    var_boot = float(lb.var(ddof=1)) if len(lb) > 1 else 0.0
    se = math.sqrt(var_boot + logit_var(live, runs) + logit_var(quoted, quote_trials))
    return {"z": (logit(live, runs) - logit(quoted, quote_trials)) / se, "se_logit": se,
            "sd_bootstrap_logit": math.sqrt(var_boot)}
