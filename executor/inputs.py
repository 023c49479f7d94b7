"""Everything a live run reads, checked before any request: pool line, tasks, endpoints, budget, deadline, method.

Bad input is refused with one line naming the file and the item
(:class:`~simulator.base.errors.ConfigError`): an endpoints file missing a
field or with a negative price, a pool model with no endpoint, a task kind
without its payload, a budget or deadline that is not a finite number > 0,
an unknown method, a cost mode with no live meaning. The budget and the
deadline come in through :mod:`simulator.costs.limits` (the flags' units and
the one rule of a ratio).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from executor.endpoints import Endpoint, check_models_served
from executor.live import Workflow
from executor.tasks import load_tasks
from executor.workflow import WorkflowFile, check_topology, pool_workflow_doc, workflow_hash
from simulator.base.errors import ConfigError
from simulator.base.outputs import check_output_path
from simulator.costs.arrays import CostSetting, build_arrays
from simulator.costs.charges import DEFAULT_PRICES, normalize_cost_mode
from simulator.methods import method_spec
from simulator.pools.pool import Pool, load_pool

LIVE_COST_MODES = ("token_cost_mean", "output_money_cost_mean")


def live_cost_mode(mode: str) -> str:
    m = normalize_cost_mode(mode)
    if m not in LIVE_COST_MODES:
        raise ConfigError(f"--cost-mode {mode!r} has no live meaning (an endpoint bills tokens); use token or money")
    return m


def check_method(method: str) -> str:
    method_spec(method, "--method")  # refuses an unknown name with the closest one
    return method


def load_dag(pool_path: str, dag: int) -> tuple[Pool, int]:
    pool = load_pool(pool_path)
    if not (0 <= int(dag) < len(pool)):
        raise ConfigError(f"{pool_path}: --dag {dag} does not exist (the pool has {len(pool)} DAGs)")
    return pool, int(dag)


def live_prices(endpoints: Mapping[str, Endpoint], stats) -> tuple[dict[str, float], str | None]:
    """Output prices of the endpoints as the simulator's price table (``default`` priced by its own endpoint)."""
    prices = {m: ep.output_price_per_1m for m, ep in endpoints.items()}
    return prices, ("default" if "default" in endpoints else None)


def make_workflow(pool: Pool, dag: int, pool_path: str, endpoints: Mapping[str, Endpoint] | None,
                  endpoints_path: str, tasks_path: str | None, cost_mode: str,
                  workflow: WorkflowFile | None = None) -> Workflow:
    """The workflow of pool row ``dag``: arrays priced by the endpoints (None: the default price table); with a
    workflow file, its tasks, node names and hash (the pool line must have its graph)."""
    stats = pool[dag]
    where = f"DAG {dag} (problem {stats.problem_id!r}, {pool_path} line {stats.line}):"
    models = [m for j, m in enumerate(stats.model_ids) if stats.available[:, j].any()]
    if endpoints is not None:
        check_models_served(endpoints, models, endpoints_path, where)
        known = {m for st in pool for m in st.model_ids}
        for m in endpoints:
            if m not in known:  # a typo must not go unnoticed
                raise ConfigError(f"{endpoints_path}: [models.{m}]: the pool ({pool_path}) has no model {m!r} "
                                  f"(its models: {', '.join(sorted(known))})")
        prices, default_model = live_prices(endpoints, stats)
    else:
        prices, default_model = dict(DEFAULT_PRICES), None
    arr = build_arrays(stats, CostSetting(cost_mode=cost_mode, prices=prices, default_price_model=default_model))
    node_ids = [int(x) for x in stats.node_ids]
    parents = {node_ids[v]: [node_ids[int(p)] for p in arr.parent_idx[arr.parent_ptr[v]:arr.parent_ptr[v + 1]]]
               for v in range(arr.n)}
    if workflow is not None:  # tasks, names and hash from the workflow file; the pool line must be its graph
        check_topology(workflow.wf, node_ids, parents, where)
        return Workflow(stats=stats, arr=arr, tasks=workflow.tasks, cost_mode=cost_mode, source=f"{pool_path}:{dag}",
                        workflow_hash=workflow.hash, node_names=dict(workflow.names))
    tasks = load_tasks(tasks_path, node_ids, parents)
    doc = pool_workflow_doc(pool.raw(dag), stats.problem_id, node_ids, parents, tasks, tasks_dataset(tasks_path))
    return Workflow(stats=stats, arr=arr, tasks=tasks, cost_mode=cost_mode, source=f"{pool_path}:{dag}",
                    workflow_hash=workflow_hash(doc), node_names={n["id"]: n["name"] for n in doc["nodes"]})


def tasks_dataset(tasks_path: str | None) -> str | None:
    """The ``dataset`` item of a tasks file (part of the workflow's hash); the file was checked already."""
    if tasks_path is None:
        return None
    doc = json.loads(Path(tasks_path).read_text(encoding="utf-8"))
    return doc.get("dataset") if isinstance(doc, dict) else None


def check_trace_path(trace: str, inputs: Iterable[str | None], overwrite: bool) -> Path:
    """``--trace``: a new file (``--overwrite`` replaces one), never one of the run's inputs, never a folder
    (the project's one rule for output paths, :func:`simulator.base.outputs.check_output_path`)."""
    return check_output_path(trace, inputs=list(inputs), flag="--trace", overwrite=overwrite)
