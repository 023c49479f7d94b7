"""Synthetic pool generator: loadable, right shapes, real benchmark graphs, deterministic."""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from poolbuild import synthetic as syn
from poolbuild.synthetic import build, topology
from simulator.base.errors import UserError
from simulator.pools.pool import load_pool
from tests.harness_util import ROOT

EXAMPLES = Path(ROOT) / "examples"


def _gen(tmp_path, *args, name="pool.jsonl"):
    out = tmp_path / name
    rc = syn.main([*args, "--out", str(out)])
    assert rc == 0
    return out


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _parents_by_name(dag):
    names = {nd["node_id"]: nd["name"] for nd in dag["nodes"]}
    return {nd["name"]: sorted(names[p] for p in nd["parents"]) for nd in dag["nodes"]}


def _is_acyclic_and_layered(dag):
    """Ids are 0..n-1, children = inverse of parents, layer = longest-path depth."""
    nodes = dag["nodes"]
    n = len(nodes)
    assert [nd["node_id"] for nd in nodes] == list(range(n))
    for nd in nodes:
        for p in nd["parents"]:
            assert nd["node_id"] in nodes[p]["children"]
        for c in nd["children"]:
            assert nd["node_id"] in nodes[c]["parents"]
    depth = topology.depths([nd["parents"] for nd in nodes])  # raises on a cycle
    assert [nd["layer"] for nd in nodes] == depth
    assert dag["overall_depth"] == max(depth) + 1


@pytest.mark.parametrize("topology", ["layered", "chain", "fork_join"])
def test_generated_topologies_load_and_are_labelled(tmp_path, topology):
    out = _gen(tmp_path, "--topology", topology, "--n-dags", "5", "--n-nodes", "4-9", "--seed", "3")
    pool = load_pool(out)
    assert len(pool) == 5
    for dag, dstats in zip(_lines(out), pool, strict=True):
        assert dag["synthetic"] is True
        assert dag["dag_kind"] == f"synthetic_{topology}"
        assert dstats.dag_kind.startswith("synthetic_")
        _is_acyclic_and_layered(dag)
        assert dag["model_ids"] == list(syn.DEFAULT_MODELS)
        assert set(dstats.model_ids) == set(syn.DEFAULT_MODELS)
        if topology != "fork_join":
            assert 4 <= dag["n_nodes"] <= 9


def test_chain_shape():
    t = syn.chain(6)
    assert t.parents == [[], [0], [1], [2], [3], [4]]


def test_fork_join_shape():
    t = syn.fork_join(width=3, length=2, repeats=2)
    assert t.n == 1 + 2 * (3 * 2 + 1)
    children = [[] for _ in range(t.n)]
    for v, ps in enumerate(t.parents):
        for p in ps:
            children[p].append(v)
    joins = [v for v, ps in enumerate(t.parents) if len(ps) == 3]
    forks = [v for v in range(t.n) if len(children[v]) == 3]
    assert forks == [0, 7] and joins == [7, 14]
    assert [v for v in range(t.n) if not t.parents[v]] == [0]
    assert [v for v in range(t.n) if not children[v]] == [14]


def test_layered_every_non_root_has_a_parent_in_previous_layer():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        n_layers = int(rng.integers(1, n + 1))
        t = syn.layered(n, n_layers, float(rng.random()), rng)
        assert t.n == n
        depth = topology.depths(t.parents)
        assert max(depth) + 1 == n_layers  # layer == depth and all layers are non-empty
        for v, ps in enumerate(t.parents):
            assert all(p < v for p in ps)
            if depth[v] > 0:
                assert any(depth[p] == depth[v] - 1 for p in ps)


def test_max_width_limits_layers_and_filters_benchmarks(tmp_path):
    rng = np.random.default_rng(1)
    for _ in range(30):
        n = int(rng.integers(1, 20))
        t = syn.layered(n, 1, 0.5, rng, max_width=2)
        assert t.n == n and topology.max_layer_width(t) <= 2
    out = _gen(
        tmp_path, "--topology", "codeflow,layered:4", "--n-dags", "6", "--max-width", "2",
        "--benchmark-nodes", "4-9", "--n-nodes", "5-9", "--seed", "3",
    )
    for dag in _lines(out):
        layers = [nd["layer"] for nd in dag["nodes"]]
        assert max(layers.count(x) for x in set(layers)) <= 2


def test_codeflow_topologies_match_benchmark(tmp_path):
    bench = json.loads(topology.CODEFLOW_FILE.read_text(encoding="utf-8"))
    out = _gen(tmp_path, "--topology", "codeflow", "--models", "1", "--seed", "1")
    dags = _lines(out)
    assert len(dags) == len(bench) == len(load_pool(out))
    for dag in dags:
        info = dag["synthetic_info"]
        prob = bench[info["source_index"]]
        # the CodeFlow loader's id: the file's, with "__2" on the second of two problems sharing one
        assert info["source_problem_id"] in (prob["problem-id"], prob["problem-id"] + "__2")
        assert dag["dag_kind"] == "synthetic_codeflow_topology" and dag["synthetic"] is True
        want = {s["name"]: sorted(s["dependencies"]) for s in prob["subproblems"]}
        assert _parents_by_name(dag) == want
        # layer = graph depth (the benchmark's own `depth` field disagrees on 4 problems)
        _is_acyclic_and_layered(dag)


def test_proofflow_topologies_match_benchmark_without_self_loops(tmp_path, caplog):
    bench = json.loads(topology.PROOFFLOW_FILE.read_text(encoding="utf-8"))
    with caplog.at_level(logging.WARNING, logger="proofflow.benchmark"):  # the loader's warning
        out = _gen(tmp_path, "--topology", "proofflow", "--models", "2", "--seed", "1")
    assert sum("self-loop dropped" in r.getMessage() for r in caplog.records) == 8
    dags = _lines(out)
    assert len(dags) == len(bench) == len(load_pool(out))
    n_dropped = 0
    for dag in dags:
        prob = bench[dag["synthetic_info"]["source_index"]]
        want = {
            s["id"]: sorted(d for d in s["dependencies"] if d != s["id"])
            for s in prob["proof_graph"]
        }
        assert _parents_by_name(dag) == want
        n_dropped += bool(dag["synthetic_info"].get("dropped_self_loops"))
        _is_acyclic_and_layered(dag)
    assert n_dropped == 8


def test_benchmark_problems_are_named_as_in_real_pools():
    """Synthetic topologies take the problem ids of the benchmark loaders that real pools are built from.

    Pinned on the bundled files: 73 of the 184 ProofFlow ids contain spaces
    (the loader writes ``_``), and two CodeFlow ids are shared by two problems
    each (the loader suffixes the second with ``__2``); a synthetic pool once
    parsed the files itself and named these differently.
    """
    from codeflow.dataset import load_problems
    from ProofFlow.benchmark import load_benchmark

    raw = json.loads(topology.PROOFFLOW_FILE.read_text(encoding="utf-8"))
    real = [p.problem_id for p in load_benchmark()]
    topo = [t.info["source_problem_id"] for t in syn.proofflow_topologies()]
    assert len(raw) == len(real) == 184 and topo == real
    assert sum(" " in f"{p['origin']}_{p['id']}" for p in raw) == 73  # e.g. origin "M series.json"
    assert not any(" " in pid for pid in topo)
    raw_cf = json.loads(topology.CODEFLOW_FILE.read_text(encoding="utf-8"))
    real_cf = [p.problem_id for p in load_problems()]
    topo_cf = [t.info["source_problem_id"] for t in syn.codeflow_topologies()]
    assert topo_cf == real_cf and len(set(topo_cf)) == len(topo_cf)
    assert sum(a != b["problem-id"] for a, b in zip(real_cf, raw_cf, strict=True)) == 2
    # and the pool line carries it: syn_<topology>_<index>_<real id>
    dags = syn.generate([("proofflow", None)], stats=syn.ParametricStats(syn.DEFAULT_MODELS),
                        shape=syn.ShapeConfig(), n_rows=0, seed=1)
    assert [d["problem_id"].split("_", 3)[3] for d in dags] == real


def test_benchmark_size_filter_and_selection(tmp_path):
    out = _gen(
        tmp_path, "--topology", "codeflow:5", "--benchmark-nodes", "4-9", "--seed", "9", "--rows", "2"
    )
    dags = _lines(out)
    assert len(dags) == 5
    assert all(4 <= d["n_nodes"] <= 9 for d in dags)
    idx = [d["synthetic_info"]["source_index"] for d in dags]
    assert idx == sorted(set(idx))
    with pytest.raises(UserError, match="only"):
        build.make_topologies("codeflow", 500, syn.ShapeConfig(), 0, 0)


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    args = ["--topology", "codeflow:3,layered:3,fork_join:2", "--benchmark-nodes", "3-9"]
    args += ["--rows", "4"]
    a = _gen(tmp_path, *args, "--seed", "5", name="a.jsonl")
    b = _gen(tmp_path, *args, "--seed", "5", name="b.jsonl")
    c = _gen(tmp_path, *args, "--seed", "6", name="c.jsonl")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_topology_independent_of_statistics_settings(tmp_path):
    a = _gen(tmp_path, "--topology", "layered", "--n-dags", "4", "--seed", "2", name="a.jsonl")
    b = _gen(
        tmp_path, "--topology", "layered", "--n-dags", "4", "--seed", "2", "--rows", "3",
        "--models", "1", name="b.jsonl",
    )
    pa = [[nd["parents"] for nd in d["nodes"]] for d in _lines(a)]
    pb = [[nd["parents"] for nd in d["nodes"]] for d in _lines(b)]
    assert pa == pb


def test_multi_model_rows_and_legacy(tmp_path):
    out = _gen(
        tmp_path, "--topology", "layered", "--n-dags", "6", "--rows", "5",
        "--legacy-model", "30B_ins", "--seed", "4",
    )
    pool = load_pool(out)
    for dag, d in zip(_lines(out), pool, strict=True):
        assert dag["baseline_model"] == "30B_ins"
        for nd in dag["nodes"]:
            assert nd["legacy_template_model"] == "30B_ins"
            assert nd["template"] == nd["model_templates"]["30B_ins"]
            assert nd["empirical_samples"] == nd["empirical_samples_by_model"]["30B_ins"]
            assert set(nd["empirical_samples_by_model"]) == set(syn.DEFAULT_MODELS)
            for rows in nd["empirical_samples_by_model"].values():
                assert len(rows) == 5
            assert nd["template"]["success_prob"] > 0
        j = d.model_ids.index("30B_ins")
        assert (d.legacy_model == j).all()
        assert (d.success_prob[:, j] > 0).all()


def test_parametric_relations_between_models(tmp_path):
    """Thinking models succeed more and talk more; 30B models are slower per token."""
    out = _gen(tmp_path, "--topology", "layered", "--n-dags", "40", "--rows", "8", "--seed", "0")
    pool = load_pool(out)
    ids = pool.model_ids
    p = np.concatenate([d.success_prob for d in pool])
    tok = np.concatenate([d.token_cost_mean for d in pool])
    lat = np.concatenate([d.lat_mean for d in pool])
    col = {m: ids.index(m) for m in ids}
    mean_p = {m: p[:, j].mean() for m, j in col.items()}
    assert mean_p["4B_think"] > mean_p["4B_ins"] and mean_p["30B_think"] > mean_p["30B_ins"]
    assert mean_p["30B_ins"] > mean_p["4B_ins"] and mean_p["30B_think"] > mean_p["4B_think"]
    assert tok[:, col["4B_think"]].mean() > 3 * tok[:, col["4B_ins"]].mean()
    sec_per_tok = lat / tok
    assert sec_per_tok[:, col["30B_ins"]].mean() > sec_per_tok[:, col["4B_ins"]].mean()
    # models are correlated through the shared node difficulty
    assert np.corrcoef(p[:, col["4B_ins"]], p[:, col["30B_think"]])[0, 1] > 0.3


def test_single_model_parametric_output(tmp_path):
    out = _gen(tmp_path, "--topology", "chain", "--n-dags", "2", "--models", "30B_ins")
    for dag in _lines(out):
        assert "model_ids" not in dag
        for nd in dag["nodes"]:
            assert "model_templates" not in nd and "empirical_samples" not in nd
            assert set(nd["template"]) >= {"success_prob", "lat_mean", "lat_std", "cost_mean"}
            assert nd["legacy_template_model"] == "30B_ins"
    assert load_pool(out).model_ids == ("default",)


def test_template_csv_single_and_multi_model(tmp_path):
    single = tmp_path / "lib.csv"
    single.write_text(
        "success_prob,lat_mean,lat_std,cost_mean\n0.5,10,2,100\n0.9,4,1,40\n", encoding="utf-8"
    )
    out = _gen(tmp_path, "--topology", "chain", "--n-dags", "3", "--template-csv", str(single),
               name="s.jsonl")
    allowed = [(0.5, 10.0), (0.9, 4.0)]
    for dag in _lines(out):
        for nd in dag["nodes"]:
            t = nd["template"]
            assert (t["success_prob"], t["lat_mean"]) in allowed
            assert "model_templates" not in nd
    assert load_pool(out).model_ids == ("default",)

    multi = tmp_path / "multi.csv"
    multi.write_text(
        "model_id,success_prob,lat_mean,lat_std,cost_mean,token_cost_mean\n"
        "a,0.0,5,1,50,50\na,0.6,5,1,50,50\nb,0.8,9,3,200,180\n",
        encoding="utf-8",
    )
    out = _gen(tmp_path, "--topology", "layered", "--n-dags", "3", "--template-csv", str(multi),
               "--rows", "6", name="m.jsonl")
    pool = load_pool(out)
    assert pool.model_ids == ("a", "b")
    for dag in _lines(out):
        assert dag["model_ids"] == ["a", "b"] and dag["baseline_model"] == "a"
        for nd in dag["nodes"]:
            assert nd["template"]["success_prob"] > 0  # the legacy model never gets p = 0
            assert len(nd["empirical_samples_by_model"]["b"]) == 6


def test_bad_inputs_are_user_errors(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("success_prob,lat_mean\n0.5,3\n", encoding="utf-8")
    assert syn.main(["--template-csv", str(bad), "--n-dags", "1", "--out", str(tmp_path / "x")]) == 2
    assert "lacks column" in capsys.readouterr().err
    assert syn.main(["--topology", "star", "--out", str(tmp_path / "x")]) == 2
    assert "unknown topology" in capsys.readouterr().err
    assert syn.main(["--models", "gpt9", "--n-dags", "1", "--out", str(tmp_path / "x")]) == 2
    assert "unknown parametric model" in capsys.readouterr().err
    assert syn.main(["--topology", "chain", "--out", str(tmp_path / "x")]) == 2
    assert "--n-dags" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_bundled_examples_are_synthetic_and_valid():
    for name, multi in (("example_pool.jsonl", True), ("example_single_model.jsonl", False)):
        path = EXAMPLES / name
        pool = load_pool(path)
        for dag, d in zip(_lines(path), pool, strict=True):
            assert dag["synthetic"] is True and dag["dag_kind"].startswith("synthetic_")
            legacy = d.legacy_model
            assert (d.success_prob[np.arange(d.n_nodes), legacy] > 0).all()
        assert (len(pool.model_ids) == 4) == multi


def test_help_exits_cleanly_and_its_examples_write_what_they_ask(tmp_path, capsys):
    """``--help`` exits 0, and every example in it, run, writes a pool of the topologies it names."""
    with pytest.raises(SystemExit) as exc:
        syn.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "SYNTHETIC" in text
    examples = [line.strip() for line in text.replace("\\\n", " ").splitlines()
                if line.strip().startswith("python -m poolbuild.synthetic")]
    assert len(examples) == 4
    lib = tmp_path / "lib.csv"
    lib.write_text("success_prob,lat_mean,lat_std,cost_mean\n0.7,2.0,0.5,40\n0.4,1.0,0.2,10\n")
    for k, example in enumerate(examples):
        words = shlex.split(example)[3:]
        words[words.index("--out") + 1] = str(tmp_path / f"{k}.jsonl")
        if "--template-csv" in words:
            words[words.index("--template-csv") + 1] = str(lib)
        assert syn.main(words) == 0, example
        capsys.readouterr()
        dags = _lines(tmp_path / f"{k}.jsonl")
        asked = [part.partition(":") for part in words[words.index("--topology") + 1].split(",")]
        kinds = {f"synthetic_{name}" + ("_topology" if name in topology.BENCHMARKS else "") for name, _, _ in asked}
        assert {d["dag_kind"] for d in dags} == kinds, example
        counts = [int(c) for _, _, c in asked if c]
        if len(counts) == len(asked):
            assert len(dags) == sum(counts), example
        elif "--n-dags" in words:
            assert len(dags) == int(words[words.index("--n-dags") + 1]) * len(asked), example
        assert len(load_pool(tmp_path / f"{k}.jsonl")) == len(dags)


def test_bundled_examples_are_what_their_commands_write(tmp_path):
    """examples/README.md's exact commands, run again, write the bundled pools byte for byte."""
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = [c for c in block.replace("\\\n", " ").splitlines() if c.strip()]
    assert len(commands) == 2
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "python" and words[1:3] == ["-m", "poolbuild.synthetic"] and words[-2] == "--out"
        bundled = Path(ROOT) / words[-1]
        assert syn.main([*words[3:-1], str(tmp_path / bundled.name)]) == 0
        assert (tmp_path / bundled.name).read_bytes() == bundled.read_bytes(), command
