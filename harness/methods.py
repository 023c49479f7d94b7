"""Method labels of a run: the method set plus the baseline suite.

A run's methods come from ``METHOD_SET`` (``simulator.methods``). The
**baseline suite** (``BASELINE_SUITE``) adds, for every listed model m, the
run's baselines re-targeted to m (``CostSetting(legacy_model=m)``), labelled
``<method>@<m>`` with ``baseline_model = m``. Plain labels keep
``baseline_model = None`` (each node's legacy model).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.methods import is_baseline

SUITE_SEP = "@"


@dataclass(frozen=True)
class MethodLabel:
    """One method column of the results."""

    label: str
    method: str  # the simulator method
    baseline_model: str | None  # suite model, None for the legacy model

    def to_json(self) -> dict:
        return {"label": self.label, "method": self.method, "baseline_model": self.baseline_model}


def method_labels(methods: list[str], suite: list[str]) -> list[MethodLabel]:
    """Labels in result order: the method set, then each suite model's baselines."""
    out = [MethodLabel(m, m, None) for m in methods]
    baselines = [m for m in methods if is_baseline(m)]
    for model in suite:
        out.extend(MethodLabel(f"{m}{SUITE_SEP}{model}", m, model) for m in baselines)
    return out


def is_baseline_label(label: str) -> bool:
    """Whether the method of ``label`` is a baseline (its registry entry says; suite labels are baselines)."""
    return is_baseline(label.split(SUITE_SEP, 1)[0])


def compared_labels(labels: list[str]) -> list[str]:
    """The labels the analysis compares with the baselines: every non-baseline method (MCPP, its variants ...)."""
    return [lab for lab in labels if not is_baseline_label(lab)]
