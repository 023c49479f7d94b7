"""Prediction surfaces: every (budget, deadline) cell of a grid from one tree of trajectories per trial.

:mod:`simulator.surface.decide` makes one MCPP decision for all the cells
that share a state (one planner evaluation); :mod:`simulator.surface.tree`
runs a trial for every cell at once, splitting only where the cells'
decisions or executions differ; :mod:`simulator.surface.compute` computes a
DAG's surface for any registered method (exact; ``docs/surface.md``).

May import: every layer below the method table (:mod:`simulator.base` to
:mod:`simulator.mcpp`) and :mod:`simulator.methods` / :mod:`simulator.simulate`.
"""
