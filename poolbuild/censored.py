"""Right-censored observations: the Kaplan-Meier product-limit estimator and imputation from its risk set.

A live run does not see every attempt to its end. A request cancelled at the
deadline (or when a sibling passed) says only that its latency exceeds the
time it ran, ``L > c``; an answer cut at ``max_tokens`` says only that its
length is at least the cap. Dropping such observations biases the latency
towards short attempts (the long ones are the ones cut off); keeping them at
their censored value biases it the same way.

**Estimator.** The Kaplan-Meier product-limit estimate of the survival
function from n observations (value x_i, event flag d_i: 1 observed, 0
censored at x_i)::

    S(t) = prod over distinct observed values t_k <= t of (1 - d_k / n_k)

with d_k the observed values equal to t_k and n_k the observations (either
kind) >= t_k (a censored value tied with an observed one counts at risk:
censored "just after"). Its jump at t_k is the mass the estimate gives t_k.

**Rows.** A pool needs rows, not a curve. Each censored observation at c is
replaced by a whole observed row (a *donor*) drawn from the observed rows with
value > c (>= c for token counts) with probability proportional to their KM
jumps: that is the KM estimate's own conditional distribution of the value
given that it exceeds c (Efron's redistribution to the right), so the rows'
empirical distribution has the KM estimate as its expectation, and the donor
carries its success flag and its other measure along (the joint law is kept).
The draws are keyed by the observation's identity, so adding a trace never
changes another observation's imputation.

**Assumptions.** (1) Independent censoring: given the (node, model), the
censoring time does not depend on the attempt's own latency or length. A
deadline or a sibling's pass is set by *other* draws, so this holds for the
executor's cancellations. (2) The tail: a censored value beyond every observed
one has no donor; it is dropped and counted (``dropped_censored``), which
biases towards shorter values only by what lies beyond the longest observed
attempt, the KM estimate's own limit. (3) Success given the value: a donor's
success stands for the censored attempt's, i.e. success is missing at random
given latency (or length).
"""

from __future__ import annotations

import numpy as np


def _product_limit(values: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, ...]:
    """(distinct observed values t_k ascending, n_k observations >= t_k, d_k observed ones equal to t_k, S(t_k)):
    the estimate and what its variance is made of (the counts by sorting, not a pass over the values per t_k)."""
    values = np.asarray(values, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    ts, deaths = np.unique(values[observed], return_counts=True)
    at_risk = len(values) - np.searchsorted(np.sort(values), ts, side="left")
    surv = np.empty(len(ts))
    s = 1.0
    for k in range(len(ts)):
        s *= 1.0 - int(deaths[k]) / int(at_risk[k])
        surv[k] = s
    return ts, at_risk, deaths, surv


def km_survival(values: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct observed values t_k ascending, S(t_k)) of the product-limit estimator."""
    ts, _, _, surv = _product_limit(values, observed)
    return ts, surv


def km_jumps(values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per observation: the KM mass of its value shared by the observed ones tied there (0 for a censored one)."""
    values = np.asarray(values, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    ts, surv = km_survival(values, observed)
    prev = np.concatenate([[1.0], surv[:-1]])
    jump = dict(zip(ts.tolist(), (prev - surv).tolist(), strict=True))
    out = np.zeros(len(values))
    for i in np.flatnonzero(observed):
        ties = int(np.sum((values == values[i]) & observed))
        out[i] = jump[float(values[i])] / ties
    return out


def km_mean(values: np.ndarray, observed: np.ndarray) -> float:
    """The KM mean (restricted to the largest observed value when the largest value is censored)."""
    ts, surv = km_survival(values, observed)
    if len(ts) == 0:
        return float("nan")
    prev = np.concatenate([[1.0], surv[:-1]])
    mass = prev - surv
    return float(np.sum(mass * ts) / max(np.sum(mass), 1e-300))


def _donor_pool(values: np.ndarray, candidates: np.ndarray, threshold: float, strict: bool) -> np.ndarray:
    """The candidates a value censored at ``threshold`` may take its donor from (``strict``: above it, else at or
    above it)."""
    return candidates[(values[candidates] > threshold) if strict else (values[candidates] >= threshold)]


def donor(values: np.ndarray, weights: np.ndarray, candidates: np.ndarray, threshold: float, strict: bool,
          u: float) -> int:
    """The index of the donor of a value censored at ``threshold``: among ``candidates`` (observed) with value
    above it (``strict``: >, else >=), drawn with probability proportional to ``weights`` by the uniform ``u``;
    -1 when there is none."""
    sel = _donor_pool(values, candidates, threshold, strict)
    if len(sel) == 0:
        return -1
    w = weights[sel]
    total = float(w.sum())
    if total <= 0:
        return int(sel[min(int(u * len(sel)), len(sel) - 1)])
    cum = np.cumsum(w) / total
    return int(sel[min(int(np.searchsorted(cum, u, side="right")), len(sel) - 1)])


# -- uncertainty -----------------------------------------------------------------------------


def km_mean_var(values: np.ndarray, observed: np.ndarray) -> float:
    """The sampling variance of the KM mean: the Greenwood-type estimate for the mean restricted to the largest
    observed value tau (Klein and Moeschberger, *Survival Analysis*, 2nd ed., section 4.5)::

        Var = sum over distinct observed values t_k of A_k^2 d_k / (n_k (n_k - d_k)),  A_k = integral of S from t_k to tau

    With nothing censored it is the plug-in variance of a sample mean, sum (x - mean)^2 / n^2. When the largest
    value is censored, :func:`km_mean` is the mean given a value at most tau, which differs from the restricted
    mean by the mass left beyond tau (``dropped_censored`` counts what it stands for); the variance is the
    restricted mean's."""
    ts, n_k, d_k, surv = _product_limit(values, observed)
    if len(ts) == 0:
        return float("nan")
    seg = surv[:-1] * np.diff(ts)  # the area under S over [t_k, t_k+1)
    area = np.concatenate([np.cumsum(seg[::-1])[::-1], [0.0]])  # A_k: from t_k to tau
    at_risk, deaths = n_k.astype(float), d_k.astype(float)
    alive = at_risk - deaths
    terms = np.where(alive > 0, area ** 2 * deaths / (at_risk * np.maximum(alive, 1.0)), 0.0)
    return float(terms.sum())


def donor_var(values: np.ndarray, weights: np.ndarray, candidates: np.ndarray, threshold: float,
              strict: bool) -> float | None:
    """The variance of the value :func:`donor` gives an observation censored at ``threshold`` (over its uniform);
    None when there is no donor (the observation is dropped)."""
    sel = _donor_pool(values, candidates, threshold, strict)
    if len(sel) == 0:
        return None
    w = weights[sel]
    p = w / w.sum() if float(w.sum()) > 0 else np.full(len(sel), 1.0 / len(sel))
    x = values[sel]
    mean = float(p @ x)
    return float(p @ (x - mean) ** 2)


def imputed_mean_var(values: np.ndarray, observed: np.ndarray, strict: bool = True) -> tuple[float, float]:
    """(sampling, imputation) variance of the mean of the rows :func:`poolbuild.from_traces.live_rows` makes of
    these observations: the observed ones as they are and each censored one replaced by a donor (dropped when it
    has none). Given the observations, the rows' mean is the KM mean (its expectation over the donors, exactly when
    none is dropped) plus the donors' own noise, independent across censored observations: the first part varies as :func:`km_mean_var`
    says, the second is the sum of the donors' variances over the rows' count squared. A z-score of the rows'
    mean against a truth divides by the root of their sum."""
    values = np.asarray(values, dtype=float)
    observed = np.asarray(observed, dtype=bool)
    weights = km_jumps(values, observed)
    cand = np.flatnonzero(observed)
    spreads = [donor_var(values, weights, cand, float(c), strict) for c in values[~observed]]
    kept = [s for s in spreads if s is not None]
    rows = len(cand) + len(kept)
    return km_mean_var(values, observed), (sum(kept) / rows ** 2 if rows else float("nan"))
