"""``python -m executor workflow --from-pool P --dag I --out W [--tasks T]``: the workflow file of a pool line
(docs/workflows.md); its own module so that :mod:`executor.workflow` imports nothing of the run's inputs."""

from __future__ import annotations

import json
from collections.abc import Sequence

from executor.inputs import load_dag, tasks_dataset
from executor.tasks import load_tasks
from executor.workflow import check_workflow, pool_workflow_doc, workflow_hash
from simulator.base import cliargs
from simulator.base.io_utils import atomic_write_text
from simulator.base.outputs import check_output_path


def cmd_workflow(argv: Sequence[str]) -> int:
    """``python -m executor workflow --from-pool P --dag I --out W [--tasks T]``: the workflow of a pool line."""
    ap = cliargs.ArgumentParser(prog="python -m executor workflow",
                                 description="Write the workflow file (DAG, node names, tasks) of a pool line.")
    ap.add_argument("--from-pool", type=cliargs.input_path(), required=True, metavar="P", help="DAG pool JSONL")
    ap.add_argument("--dag", type=int, default=0, help="row of the DAG in the pool (0-based)")
    ap.add_argument("--tasks", type=cliargs.input_path(), default=None, help="tasks file (JSON); default: the loopback generic task per node")
    ap.add_argument("--out", type=cliargs.output_path(), required=True, metavar="W", help="workflow file to write (JSON)")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing workflow file")
    args = ap.parse_args(argv)
    check_output_path(args.out, inputs=[args.from_pool, args.tasks], overwrite=args.overwrite)
    pool, dag = load_dag(args.from_pool, args.dag)
    st = pool[dag]
    raw = pool.raw(dag)
    node_ids = [int(x) for x in st.node_ids]
    parents = {int(n["node_id"]): [int(p) for p in n["parents"]] for n in raw["nodes"]}
    tasks = load_tasks(args.tasks, node_ids, parents)
    doc = pool_workflow_doc(raw, st.problem_id, node_ids, parents, tasks, tasks_dataset(args.tasks))
    check_workflow(doc, args.out)  # what is written loads back
    atomic_write_text(args.out, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"{args.out}: workflow {doc['name']!r}, {len(node_ids)} nodes, {workflow_hash(doc)}")
    return 0
