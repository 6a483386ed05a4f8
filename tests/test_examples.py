"""Every script in examples/ runs as a user runs it (``python examples/NAME.py``), quickly, and prints what it
says; the README's environment loop is examples/env_loop.py, word for word. The third-party libraries'
examples (cleanrl_masked_ppo.py, rl_zoo3/) are run by tests/clients/."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _run(name: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_every_example_is_run_here_or_by_the_clients_tests():
    run_here = set(re.findall(r'_run\("([\w.]+)"', Path(__file__).read_text(encoding="utf-8")))
    scripts = {p.name for p in EXAMPLES.glob("*.py")} - {"cleanrl_masked_ppo.py"}
    assert scripts == run_here


def test_the_readmes_loop_is_the_env_loop_example():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(code for code in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "action_mask" in code)
    assert block in (EXAMPLES / "env_loop.py").read_text(encoding="utf-8")


def test_env_loop(tmp_path):
    out = _run("env_loop.py", cwd=tmp_path)
    assert re.fullmatch(r"return -\d+\.\d; TE p95 slowdown \d+\.\d{3}\n", out)


def test_compare_rules(tmp_path):
    out = _run("compare_rules.py", "--seeds", "2", "--jobs", "300", cwd=tmp_path)
    rows = [line.split(" | ")[0] for line in out.strip().splitlines()[2:]]
    assert rows == ["| `fifo`", "| `k8s`", "| `fitgpp`", "| `dagger`"]


def test_custom_policy(tmp_path):
    out = _run("custom_policy.py", "--seeds", "2", "--jobs", "300", cwd=tmp_path)
    assert "| `largest-victim` |" in out


def test_lookahead_futures(tmp_path):
    args = ("--seeds", "2", "--jobs", "300", "--samples", "1", "--arrivals-hours", "6", "--window-hours", "100000")
    args += ("--estimate-noise", "0", "--perturbations", "0.5")
    figures, objective = _run("lookahead_futures.py", *args, "--split", "test", cwd=tmp_path).split("\n\n")
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in objective.strip().splitlines()[2:]}
    names = ["fitgpp", "k8s", "lookahead-nowait-pc10", "sampled-noise0-6h", "window-100000h", "perturbed0.5-all"]
    assert list(rows) == [f"| `{n}`" for n in names]
    assert all(f"| `{n}` |" in figures for n in names)
    # A window longer than the workload holds what a clone holds: the lookahead on clones' objective.
    assert rows["| `window-100000h`"][:3] == rows["| `lookahead-nowait-pc10`"][:3]


def test_custom_workload(tmp_path):
    out = _run("custom_workload.py", "--out", str(tmp_path / "trace.csv"), cwd=tmp_path)
    assert (tmp_path / "trace.csv").read_text().startswith("job_id,submit_time,duration,gpus,class")
    assert "fitgpp: TE slowdown p95" in out and "decisions on the same jobs" in out


@pytest.mark.rl
def test_train_and_compare(tmp_path, engine):
    if engine != "native":
        pytest.skip("training once is enough: the engines' agreement is checked elsewhere")
    out = _run("train_and_compare.py", "--steps", "1024", "--run-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert "| `mine` |" in out
    assert list((tmp_path / "runs").glob("*/model.zip"))


def test_shift_targets(tmp_path):
    out = _run("shift_targets.py", "--policy", "lean-ppo", "--seeds", "2", "--jobs", "300", cwd=tmp_path)
    table, last = out.strip().split("\n\n")
    rows = table.splitlines()[2:]
    assert len(rows) == 10 and rows[0].startswith("| paper (capped at 300 jobs) |")
    held = sum(row.endswith("| holds |") for row in rows)
    assert last == f"target 3 holds on {held} of 10 workloads for lean-ppo"
    # on the validation seeds: other workloads, the same judgement (the suite's split is tested in test_suite.py)
    out = _run("shift_targets.py", "--policy", "lean-ppo", "--seeds", "2", "--jobs", "300", "--split", "validation",
               cwd=tmp_path)  # fmt: skip
    other, last = out.strip().split("\n\n")
    assert len(other.splitlines()) == 12 and other != table and last.endswith("for lean-ppo (validation seeds)")
    # from a first seed other than 0: fresh seeds of the 8 synthetic workloads (a check held out from a choice)
    out = _run("shift_targets.py", "--policy", "lean-ppo", "--seeds", "2", "--jobs", "300", "--first-seed", "20",
               cwd=tmp_path)  # fmt: skip
    fresh, last = out.strip().split("\n\n")
    rows = fresh.splitlines()[2:]
    assert len(rows) == 8 and rows[0].startswith("| paper (seeds 20-21) (capped at 300 jobs) |")
    assert last.startswith("target 3 holds on ") and last.endswith(" of 8 workloads for lean-ppo")
    # a rule, an unknown name and a single seed are refused in one line
    for args, needle in ((("--policy", "fitgpp"), "one of the rules"), (("--policy", "nope"), "nope"),
                         (("--policy", "lean-ppo", "--seeds", "1"), "at least 2")):  # fmt: skip
        done = subprocess.run([sys.executable, str(EXAMPLES / "shift_targets.py"), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr


def _shift_targets():
    import importlib.util

    spec = importlib.util.spec_from_file_location("shift_targets", EXAMPLES / "shift_targets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("verdict", "te_p95", "diff", "failed"),
    [
        ({"fitgpp": "mixed", "k8s": "mixed"}, 1.05, (0.1, 0.2), []),  # TE p95 exactly 5% above: holds
        ({"fitgpp": "mixed", "k8s": "equal"}, 1.0501, (0.1, 0.2), ["TE p95"]),  # just above
        ({"fitgpp": "dominates", "k8s": "dominated"}, 1.0, (-0.5, 0.1), ["dominated"]),
        ({"fitgpp": "mixed", "k8s": "mixed"}, 1.0, (0.2, 0.1), ["objective"]),  # significantly worse
        ({"fitgpp": "mixed", "k8s": "mixed"}, 1.0, (0.2, 0.2), []),  # the interval reaches 0
        ({"fitgpp": "", "k8s": ""}, 1.0, (0.0, float("nan")), ["objective"]),  # no interval: not shown to hold
        ({"fitgpp": "dominated", "k8s": "mixed"}, 2.0, (1.0, 0.1), ["dominated", "TE p95", "objective"]),
    ],
)
def test_shift_targets_judges_each_workload_by_the_three_criteria(verdict, te_p95, diff, failed):
    # the rules' TE p95 are 1.0 (fitgpp) and 1.2 (k8s): the lower one is the reference
    assert _shift_targets().failures(verdict, {"fitgpp": 1.0, "k8s": 1.2}, te_p95, diff) == failed


def test_be_tail(tmp_path):
    from schedgym.experiments.compare import CompareConfig, run_comparison
    from schedgym.experiments.figures import headline_figures
    from schedgym.sim import JobClass

    out = _run("be_tail.py", "--policies", "fitgpp,k8s", "--seeds", "2", "--jobs", "1000", "--split", "test",
               cwd=tmp_path)  # fmt: skip
    table, last = out.strip().split("\n\n")
    lines = table.splitlines()
    assert lines[0].startswith("| policy | BE p50 | BE p99 | tail: gangs") and len(lines) == 4
    assert re.fullmatch(r"Gang jobs are \d\.\d% of the BE jobs of these workloads\.", last)
    rows = {line.split(" | ")[0].strip("| `"): line.strip("|").split(" | ")[1:] for line in lines[2:]}
    compared = run_comparison(CompareConfig(policies=("fitgpp", "k8s"), seeds=2, n_jobs=1000))
    for label, runs in compared.runs.items():  # the BE p99 of compare's runs, on the same workloads
        be_p99 = np.mean([headline_figures(r)["be_p99"] for r in runs])
        assert rows[label][1].split(" ± ")[0] == f"{be_p99:.1f}"
        shares = [float(rows[label][k].split(" ± ")[0]) for k in (2, 3)]
        assert all(0 <= s <= 1 for s in shares) and shares[0] > 0.5  # the tail of `paper` is mostly gangs
        assert rows[label][7].split(" ± ")[0] == f"{np.mean([r.n_preemptions for r in runs]):.0f}"
        # the hours, from the runs' own records: the tail's queue wait, its time lost after the start, its length
        hours = {4: [], 5: [], 6: []}
        for run in runs:
            be_p99 = headline_figures(run)["be_p99"]
            tail = (run.job_class == JobClass.BE) & (run.slowdown >= be_p99)
            hours[4].append((run.first_start - run.submit)[tail].mean() / 3600)
            hours[5].append((run.completion - run.first_start - run.run_time)[tail].mean() / 3600)
            hours[6].append(run.duration[tail].mean() / 3600)
        for column, values in hours.items():
            assert rows[label][column].split(" ± ")[0] == f"{np.mean(values):.1f}"


@pytest.mark.parametrize("workload", ["mix", "philly"])
def test_be_tail_on_mix_and_on_a_trace(tmp_path, workload):
    """--jobs once defaulted to 5,000, which `mix` refuses; a trace window's runs keep only its measured jobs
    (after a warm-up), so its gang jobs are found by id, not by position."""
    from schedgym.experiments.compare import CompareConfig, run_comparison
    from schedgym.experiments.figures import headline_figures

    out = _run("be_tail.py", "--workload", workload, "--policies", "fitgpp", "--seeds", "2", "--split", "test",
               cwd=tmp_path)  # fmt: skip
    table, _ = out.strip().split("\n\n")
    row = table.splitlines()[2].strip("|").split(" | ")
    (runs,) = run_comparison(CompareConfig(workload=workload, policies=("fitgpp",), seeds=2)).runs.values()
    assert row[2].split(" ± ")[0] == f"{np.mean([headline_figures(r)['be_p99'] for r in runs]):.1f}"


def _training_json(folder: Path, points: list[tuple[float, float, float, float]], rules: dict) -> Path:
    curve = [dict(zip(("te_p95", "be_p50", "be_p95", "be_p99"), p, strict=True), update=100 + 10 * i)
             for i, p in enumerate(points)]  # fmt: skip
    folder.mkdir()
    (folder / "training.json").write_text(json.dumps({"curve": curve, "validation_rules": rules}))
    return folder


def test_frontier(tmp_path):
    rules = {"fitgpp": {"te_p95": 1.05, "be_p50": 1.04, "be_p95": 14.0, "be_p99": 50.0},
             "k8s": {"te_p95": 1.04, "be_p50": 1.00, "be_p95": 13.0, "be_p99": 70.0}}  # fmt: skip
    # below both on all four (the better rule's mean per figure: 1.04, 1.00, 13.0, 50.0), then one figure above
    a = _training_json(tmp_path / "a", [(1.04, 1.00, 13.0, 50.0), (1.04, 1.00, 13.0, 50.1)], rules)
    b = _training_json(tmp_path / "b", [(1.05, 1.02, 12.0, 55.0), (1.03, 1.01, 12.0, 60.0)], rules)
    out = _run("frontier.py", str(a), str(b), cwd=tmp_path)
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()[2:]]
    rows = {c[0]: c[1:] for c in cells}
    assert rows["a"] == ["2", "1.000-1.000", "50.0-50.1", "1.040-1.040", "1"]
    assert rows["b"] == ["2", "1.010-1.020", "55.0-60.0", "1.030-1.050", "0"]
    assert rows["`k8s` (rule)"] == ["", "1.000", "70.0", "1.040", ""]
    # runs validated on other workloads are refused, with one line
    c = _training_json(tmp_path / "c", [(1.0, 1.0, 1.0, 1.0)], {**rules, "k8s": {**rules["k8s"], "be_p99": 71.0}})
    done = subprocess.run([sys.executable, str(EXAMPLES / "frontier.py"), str(a), str(c)], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "frontier.py: error: c was validated on other workloads (its rules' means differ)"
    ]

    # a comparison on the same workloads adds its other policies; one on other workloads is refused
    def compared(fitgpp_p99: float) -> str:
        def entry(te_p95: float, be_p50: float, be_p99: float) -> dict:
            return {"te": {"slowdown_p95": te_p95}, "be": {"slowdown_p50": be_p50, "slowdown_p99": be_p99}}

        policies = {"fitgpp": entry(1.05, 1.04, fitgpp_p99), "k8s": entry(1.04, 1.00, 70.0),
                    "oracle": entry(1.03, 1.003, 48.0)}  # fmt: skip
        path = tmp_path / f"cmp{fitgpp_p99}.json"
        path.write_text(json.dumps({"policies": policies}))
        return str(path)

    out = _run("frontier.py", str(a), "--compare", compared(50.0), cwd=tmp_path)
    assert out.splitlines()[-1] == "| `oracle` (compare) | | 1.003 | 48.0 | 1.030 | |"
    done = subprocess.run([sys.executable, str(EXAMPLES / "frontier.py"), str(a), "--compare", compared(51.0)],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "its fitgpp is not the runs'" in done.stderr
    missing = subprocess.run([sys.executable, str(EXAMPLES / "frontier.py"), str(tmp_path / "none")], cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.startswith("frontier.py: error: ")
    assert missing.stderr.count("\n") == 1  # one line, no traceback
    # every refusal is one line and status 2, before any table is printed
    empty = _training_json(tmp_path / "empty", [], rules)
    no_p95 = tmp_path / "no_p95"
    no_p95.mkdir()
    point = {"update": 100, "te_p95": 1.0, "be_p50": 1.0, "be_p99": 1.0}  # be_p95 missing
    (no_p95 / "training.json").write_text(json.dumps({"curve": [point], "validation_rules": rules}))
    refused = {
        (str(empty),): "no run has a checkpoint from update 100 on",
        (str(no_p95),): "not a training.json of agents.lean_ppo",
        (str(a), str(tmp_path / "x" / "a")): "two runs have the same folder name",
        (str(a), "--compare", compared(51.0)): "its fitgpp is not the runs'",
        (str(a), "--plot", str(tmp_path / "f.xyz")): "expected a .png, .pdf or .svg file name",
    }
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "a").symlink_to(a)
    for args, message in refused.items():
        done = subprocess.run([sys.executable, str(EXAMPLES / "frontier.py"), *args], cwd=tmp_path,
                              capture_output=True, text=True)  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    # a run without checkpoints in range keeps its row, with 0 of them
    out = _run("frontier.py", str(a), str(empty), cwd=tmp_path)
    assert "| empty | 0 | | | | 0 |" in out.splitlines()
    pytest.importorskip("matplotlib")
    _run("frontier.py", str(a), str(b), "--compare", compared(50.0), "--plot", str(tmp_path / "f.png"), cwd=tmp_path)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("small_nodes", "same_as"), [(4, "fitgpp"), (3, "lookahead-nowait-pc10")])
def test_switch_teacher_is_fitgpp_on_small_clusters_and_the_lookahead_elsewhere(tmp_path, small_nodes, same_as):
    # The `small` cluster has 4 nodes: with --small-nodes 4 the switch is fitgpp run for run, with 3 the lookahead.
    out = tmp_path / "out.json"
    policies = "fitgpp,lookahead-nowait-pc10,switch"
    _run("switch_teacher.py", "--small-nodes", str(small_nodes), "compare", "--policies", policies, "--cluster",
         "small", "--jobs", "200", "--seeds", "2", "--no-progress", "--json", str(out), cwd=tmp_path)  # fmt: skip
    runs = {name: p["per_seed"] for name, p in json.loads(out.read_text())["policies"].items()}
    assert runs["fitgpp"] != runs["lookahead-nowait-pc10"]  # the two rules differ here, so the test can tell
    assert runs["switch"] == runs[same_as]


def _fallback_agent(monkeypatch):
    import importlib.util

    monkeypatch.syspath_prepend(str(EXAMPLES))  # it imports shift_targets from its folder, as when run
    spec = importlib.util.spec_from_file_location("fallback_agent", EXAMPLES / "fallback_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("cluster", "small_nodes", "same_as"), [("small", 4, "fitgpp"), ("small", 3, "dagger"),
                                                                  ("paper", 8, "dagger")])  # fmt: skip
def test_fallback_agent_is_fitgpp_on_small_clusters_and_the_agent_elsewhere(monkeypatch, cluster, small_nodes, same_as):
    from schedgym.experiments.runner import run_policy, run_rng
    from schedgym.registry import make_policy
    from schedgym.sim.cluster import cluster_preset
    from schedgym.workloads.synthetic import generate, preset

    fallback = _fallback_agent(monkeypatch).fallback("dagger,dagger", small_nodes)  # an ensemble of two copies
    spec = cluster_preset(cluster)
    wl = generate(preset("paper", n_jobs=300), spec, np.random.default_rng(np.random.SeedSequence([0, 0])))
    policies = {"fitgpp": make_policy("fitgpp"), "dagger": make_policy("dagger"), "fallback": fallback}
    runs = {name: run_policy(p, spec, wl, rng=run_rng(0)) for name, p in policies.items()}
    assert not np.array_equal(runs["fitgpp"].completion, runs["dagger"].completion)  # so the test can tell
    for field in ("completion", "first_start", "preemptions"):
        np.testing.assert_array_equal(getattr(runs["fallback"], field), getattr(runs[same_as], field))


def test_fallback_agent_runs_shift_targets_and_refuses_what_it_cannot_do(tmp_path):
    out = _run("fallback_agent.py", "--members", "dagger", "--seeds", "2", "--jobs", "300", cwd=tmp_path)
    table, last = out.strip().split("\n\n")
    assert len(table.splitlines()) == 12 and last.startswith("target 3 holds on ") and last.endswith("for fallback")
    for args, needle in ((("--members", "dagger,lean-ppo"), "'lean-ppo' is not a MaskablePPO agent"),
                         (("--members", "dagger,ppo"), "'ppo' reads other observations than 'dagger'"),
                         (("--members", "nope"), "nope"), (("--members", "dagger", "--policy=k8s"), "--policy"),
                         (("--members", "dagger", "--policy", "k8s"), "--policy"),
                         (("--members", "dagger", "--small-nodes", "-1"), "at least 0")):  # fmt: skip
        done = subprocess.run([sys.executable, str(EXAMPLES / "fallback_agent.py"), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr, done.stderr
