"""The workflow file's format: a DAG with a name per node and a task per node (JSON), and its content hash.

``docs/workflows.md`` describes it::

    {"workflow": 1, "name": "my_pipeline",
     "dataset": "codeflow/data/codeflowbench_repo.json",        # codeflow tasks only (optional)
     "nodes": [{"id": 0, "name": "parse", "parents": [], "task": {"kind": "generic", ...}},
               {"id": 1, "name": "solve", "parents": [0], "task": {...}}]}

This module is the format's structure and identity only (the executor checks
the tasks themselves, :mod:`executor.workflow`): the pool builder that learns
from traces (:mod:`poolbuild.from_traces`) needs the graph and the hash, not
the verifiers. The **content hash** (:func:`workflow_hash`) is SHA-256 of the
canonical JSON of the name, the dataset and the nodes (id, name, sorted
parents, task), nodes by id: key order, whitespace and node order in the file
do not change it; any change of a prompt, a verifier, a name or an edge does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.base.errors import ConfigError
from simulator.base.jsonl_log import read_json_file

WORKFLOW_FORMAT = 1
_TOP = ("workflow", "name", "dataset", "nodes", "description")
_NODE = ("id", "name", "parents", "task")


@dataclass
class WorkflowDoc:
    """A workflow document whose structure is checked: hash, node ids (file order), names, parents, task specs."""

    doc: dict[str, Any]
    hash: str
    node_ids: list[int]
    names: dict[int, str]
    parents: dict[int, list[int]]
    task_specs: dict[str, Any]  # node id (as a string) -> its task object, unchecked here

    @property
    def name(self) -> str:
        return str(self.doc["name"])

    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {v: [] for v in self.node_ids}
        for v in self.node_ids:
            for p in self.parents[v]:
                out[p].append(v)
        return out


def canonical(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the hash covers: the name, the dataset and every node (id, name, parents, task), nodes by id."""
    nodes = sorted(({"id": int(n["id"]), "name": str(n["name"]), "parents": sorted(int(p) for p in n["parents"]),
                     "task": n["task"]} for n in doc["nodes"]), key=lambda n: n["id"])
    out: dict[str, Any] = {"name": str(doc["name"]), "nodes": nodes}
    if doc.get("dataset"):
        out["dataset"] = str(doc["dataset"])
    return out


def workflow_hash(doc: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys, compact) of :func:`canonical`."""
    text = json.dumps(canonical(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _topological(ids: Sequence[int], parents: Mapping[int, Sequence[int]], where: str) -> None:
    """Refuse a cycle (one line naming a node on it)."""
    state: dict[int, int] = {}
    for start in ids:
        if state.get(start):
            continue
        stack = [(start, iter(parents[start]))]
        state[start] = 1
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[v] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                raise ConfigError(f"{where}: nodes: node {nxt} depends on itself (a cycle through node {v})")
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(parents[nxt])))


def check_workflow_doc(doc: Any, where: str) -> WorkflowDoc:
    """A workflow document's structure checked item by item (one line naming ``where`` and the item); the
    tasks are only required here (``executor.workflow`` checks them)."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: a workflow file is a JSON object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(_TOP))
    if unknown:
        raise ConfigError(f"{where}: unknown item(s) {unknown}; a workflow has {', '.join(_TOP)}")
    if doc.get("workflow") != WORKFLOW_FORMAT:
        raise ConfigError(f"{where}: workflow: the format version must be {WORKFLOW_FORMAT}, got "
                          f"{doc.get('workflow')!r}")
    if not isinstance(doc.get("name"), str) or not doc["name"].strip():
        raise ConfigError(f"{where}: name: a workflow needs a non-empty name (a string)")
    if "dataset" in doc and (not isinstance(doc["dataset"], str) or not doc["dataset"]):
        raise ConfigError(f"{where}: dataset: must be the path of a CodeFlowBench file (a string)")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(f"{where}: nodes: a workflow needs a non-empty list of nodes")
    ids: list[int] = []
    names: dict[int, str] = {}
    parents: dict[int, list[int]] = {}
    specs: dict[str, Any] = {}
    for i, n in enumerate(nodes):
        at = f"{where}: nodes[{i}]"
        if not isinstance(n, Mapping):
            raise ConfigError(f"{at}: a node is an object with {', '.join(_NODE)}")
        extra = sorted(set(n) - set(_NODE))
        if extra:
            raise ConfigError(f"{at}: unknown item(s) {extra}; a node has {', '.join(_NODE)}")
        nid = n.get("id")
        if isinstance(nid, bool) or not isinstance(nid, int) or nid < 0:
            raise ConfigError(f"{at}: id: an integer >= 0, got {nid!r}")
        if nid in names:
            raise ConfigError(f"{at}: id {nid} appears twice")
        name = n.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{at}: name: node {nid} needs a non-empty name")
        if name in names.values():
            raise ConfigError(f"{at}: name {name!r} is used by two nodes")
        ps = n.get("parents")
        if not isinstance(ps, list) or any(isinstance(p, bool) or not isinstance(p, int) for p in ps):
            raise ConfigError(f"{at}: parents: a list of node ids, got {ps!r}")
        if len(set(ps)) != len(ps):
            raise ConfigError(f"{at}: parents: node {nid} lists a parent twice")
        if "task" not in n:
            raise ConfigError(f"{at}: task: node {nid} has no task")
        ids.append(nid)
        names[nid] = name
        parents[nid] = list(ps)
        specs[str(nid)] = n["task"]
    for nid in ids:
        for p in parents[nid]:
            if p not in names:
                raise ConfigError(f"{where}: nodes: node {nid} names parent {p}, which is not a node")
    _topological(ids, parents, where)
    return WorkflowDoc(dict(doc), workflow_hash(doc), ids, names, parents, specs)


def read_workflow_doc(path: str | Path) -> WorkflowDoc:
    """Read a workflow file and check its structure (one line naming the file and the item when refused)."""
    doc = read_json_file(path, "workflow file")
    return check_workflow_doc(doc, str(path))


def check_topology(wf: WorkflowDoc, node_ids: Sequence[int], parents: Mapping[int, Sequence[int]], where: str,
                   what: str = "the pool line") -> None:
    """Refuse a graph that is not the workflow's (the same node ids, each with the same parents)."""
    ids = sorted(int(x) for x in node_ids)
    if sorted(wf.node_ids) != ids:
        raise ConfigError(f"{where}: {what}'s nodes {ids} are not the workflow's {sorted(wf.node_ids)}")
    for v in wf.node_ids:
        if sorted(wf.parents[v]) != sorted(int(p) for p in parents[v]):
            raise ConfigError(f"{where}: node {v}'s parents in {what} {sorted(int(p) for p in parents[v])} are not "
                              f"the workflow's {sorted(wf.parents[v])}")
