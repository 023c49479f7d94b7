"""A workflow without a pool: the DAG (nodes, parents, a name per node) and a task per node, in one JSON file.

A pool line carries statistics the planner plans with; a *workflow file*
carries only what a user knows before any run: the graph and, per node, what
to send and how to judge the answer (the tasks-file kinds of
:mod:`executor.tasks`). The format and its content hash are
:mod:`poolbuild.workflow_file` (``docs/workflows.md``); here the tasks are
checked too (regexes compiled, commands found, CodeFlow problems looked up).

Every trace's ``run`` event names the workflow's hash, so traces of one
workflow are recognised wherever they are and a trace of another workflow is
refused when a pool is learned from traces. A run from a pool line (``run
--pool P --dag I``) has the hash of the workflow file ``python -m executor
workflow --from-pool P --dag I`` writes for it (the same tasks), so its traces
can be learned from too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.tasks import Task, build_tasks
from poolbuild.workflow_file import (
    WORKFLOW_FORMAT,
    WorkflowDoc,
    check_topology,
    check_workflow_doc,
    read_workflow_doc,
    workflow_hash,
)
from simulator import __version__

#: the executor's version, written in every trace's ``run`` event
EXECUTOR_VERSION = f"mcpp-executor {__version__}"

__all__ = ["EXECUTOR_VERSION", "WorkflowFile", "check_topology", "check_workflow", "load_workflow",
           "pool_workflow_doc", "workflow_doc", "workflow_hash"]


@dataclass
class WorkflowFile:
    """A checked workflow: its structure (:class:`poolbuild.workflow_file.WorkflowDoc`) and its tasks."""

    wf: WorkflowDoc
    tasks: dict[int, Task]
    path: str = ""

    def __getattr__(self, name: str) -> Any:  # doc, hash, node_ids, names, parents, name, children
        return getattr(self.__dict__["wf"], name)


def _with_tasks(wd: WorkflowDoc, where: str) -> WorkflowFile:
    tdoc: dict[str, Any] = {"nodes": wd.task_specs}
    if wd.doc.get("dataset"):
        tdoc["dataset"] = wd.doc["dataset"]
    return WorkflowFile(wd, build_tasks(tdoc, wd.node_ids, wd.parents, where), where)


def check_workflow(doc: Any, where: str) -> WorkflowFile:
    """A workflow document checked item by item, tasks included (one line naming ``where`` and the item)."""
    return _with_tasks(check_workflow_doc(doc, where), where)


def load_workflow(path: str | Path) -> WorkflowFile:
    """Read and check a workflow file (one line naming the file and the item when it is refused)."""
    return _with_tasks(read_workflow_doc(path), str(path))


def node_names_of(raw_line: Mapping[str, Any]) -> dict[int, str]:
    """A pool line's node names: its nodes' ``name`` fields, ``node_<id>`` where missing (or repeated)."""
    out: dict[int, str] = {}
    for n in raw_line.get("nodes", []):
        nid = int(n["node_id"])
        name = n.get("name")
        out[nid] = name if isinstance(name, str) and name.strip() and name not in out.values() else f"node_{nid}"
    return out


def workflow_doc(name: str, node_ids: Sequence[int], names: Mapping[int, str], parents: Mapping[int, Sequence[int]],
                 tasks: Mapping[int, Task], dataset: str | None = None) -> dict[str, Any]:
    """The workflow document of a DAG and its tasks (each node's own task written out: no defaults)."""
    doc: dict[str, Any] = {"workflow": WORKFLOW_FORMAT, "name": str(name)}
    if dataset:
        doc["dataset"] = dataset
    doc["nodes"] = [{"id": int(v), "name": names[int(v)], "parents": [int(p) for p in parents[int(v)]],
                     "task": dict(tasks[int(v)].spec)} for v in node_ids]
    return doc


def pool_workflow_doc(raw_line: Mapping[str, Any], problem_id: Any, node_ids: Sequence[int],
                      parents: Mapping[int, Sequence[int]], tasks: Mapping[int, Task],
                      dataset: str | None = None) -> dict[str, Any]:
    """The workflow of a pool line run with ``tasks``: name = the problem id, the line's node names."""
    return workflow_doc(str(problem_id), node_ids, node_names_of(raw_line), parents, tasks, dataset)
