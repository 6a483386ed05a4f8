"""The shift suite, ``schedgym compare --suite shifts`` (schedgym/experiments/suite.py, docs/suite.md)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments import stats, suite
from schedgym.experiments.compare import CompareConfig, dominance
from schedgym.experiments.evaluation import evaluate_policy
from schedgym.experiments.executors import ExecutorConfig
from schedgym.experiments.figures import objective
from schedgym.experiments.suite import SUITES, SuiteEntry, markdown_table, run_suite, suite_configs
from schedgym.registry import make_policy
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.simulator import SimConfig
from schedgym.workloads.source import WorkloadSource
from schedgym.workloads.synthetic import preset

DOCS = Path(__file__).resolve().parent.parent / "docs" / "suite.md"
POLICIES = ("fitgpp", "k8s", "fifo")


def assert_one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("schedgym: error:"), stderr
    return lines[0]


# --------------------------------------------------------------------------------------------- the objective
def class_summary(n_jobs: int, slowdown_mean: float) -> dict:
    return {"n_jobs": n_jobs, "slowdown_mean": slowdown_mean}


def test_objective_by_hand():
    # TE slowdowns 1 and 2 (mean 1.5), BE slowdowns 1, 2 and 3 (mean 2): (3 + 6) / 5 jobs.
    summary = {"te": class_summary(2, 1.5), "be": class_summary(3, 2.0)}
    assert objective(summary) == pytest.approx(9 / 5)
    assert objective(summary, te_weight=2.0) == pytest.approx((2 * 3 + 6) / 5)
    assert objective(summary, be_weight=0.0) == pytest.approx(3 / 5)


def test_objective_of_one_class_and_of_none():
    assert objective({"te": class_summary(0, math.nan), "be": class_summary(4, 2.5)}) == 2.5
    assert math.isnan(objective({"te": class_summary(0, math.nan), "be": class_summary(0, math.nan)}))


def test_objective_is_minus_the_return_per_job():
    """The environment's default reward sums minus every job's slowdown: its return over the jobs is the
    objective's negative (a synthetic workload, where every job counts)."""
    from schedgym.envs.config import EnvConfig

    cluster = resolve_cluster("small")
    workload = WorkloadSource(workload="paper", n_jobs=150).evaluation("test", 0, cluster)
    (run,) = evaluate_policy(make_policy("fitgpp"), cluster, [workload], [0], env=EnvConfig())
    assert run.episode_return is not None
    assert objective(run.result.summary()) == pytest.approx(-run.episode_return / len(workload), rel=1e-9)
    assert objective(run.result.summary()) == pytest.approx(float(run.result.slowdown.mean()), rel=1e-12)


# --------------------------------------------------------------------------------------------- the entries
def docs_table() -> list[list[str]]:
    text = DOCS.read_text()
    section = text.split("## The workloads\n", 1)[1].split("\n## ", 1)[0]
    table = [ln for ln in section.splitlines() if ln.startswith("|")]  # the section's one table
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in table[2:]]


def test_the_docs_list_the_suite_as_declared():
    rows = docs_table()
    entries = SUITES["shifts"]
    assert [r[0] for r in rows] == [e.name for e in entries]
    configs = suite_configs("shifts", POLICIES, seeds=20)
    for row, entry, config in zip(rows, entries, configs, strict=True):
        source = config.source
        cluster = config.cluster if config.cluster is not None else source.default_cluster
        jobs = f"{source.synthetic_config().n_jobs:,}" if source.kind == "synthetic" else "trace window"
        changed = [f"load {config.load:g}"] if config.load is not None else []
        changed += [f"{k}={v:g}" for k, v in config.synthetic]
        expected = [entry.name, f"`{entry.workload}`", f"`{cluster}`", jobs, ", ".join(changed) or "-"]
        assert row[:5] == expected
        assert row[5] == str(config.seeds)
        assert row[6] == entry.what


def test_the_shifted_entries_change_what_they_say():
    by_name = {e.name: e for e in SUITES["shifts"]}
    base = preset("paper")
    te3 = WorkloadSource(synthetic=by_name["paper TE x3"].synthetic).synthetic_config()
    assert (te3.te_duration_median, te3.te_duration_min, te3.te_duration_max) == (
        3 * base.te_duration_median,
        3 * base.te_duration_min,
        3 * base.te_duration_max,
    )
    assert te3.load == base.load and te3.be_duration_median == base.be_duration_median
    assert resolve_cluster(by_name["paper 4 nodes"].cluster).n_nodes == 4
    assert resolve_cluster(by_name["paper 64 nodes"].cluster).n_nodes == 64
    assert by_name["paper 20,000 jobs"].n_jobs == 20_000


def test_arrivals_scale_with_the_cluster_on_64_nodes():
    """The same jobs arrive four times as fast on the 64-node cluster as on paper's 16: the load is kept."""
    source = WorkloadSource(workload="paper", n_jobs=2000)
    small = source.evaluation("test", 0, resolve_cluster("paper"))
    large = source.evaluation("test", 0, resolve_cluster("large"))
    span = [max(j.submit_time for j in w.jobs) for w in (small, large)]
    assert span[1] == pytest.approx(span[0] / 4, rel=1e-6)


def test_trace_entries_take_as_many_seeds_as_they_have_test_windows():
    configs = {c.workload: c for c in suite_configs("shifts", POLICIES, seeds=20)}
    assert configs["philly"].seeds == WorkloadSource(workload="philly").n_evaluation("test") == 7
    assert configs["alibaba2023"].seeds == 5 and configs["alibaba2023"].cluster == "alibaba2023-contended"
    assert all(c.seeds == 2 for c in suite_configs("shifts", POLICIES, seeds=2))


def test_max_jobs_caps_synthetic_entries_only():
    configs = suite_configs("shifts", POLICIES, seeds=2, max_jobs=300)
    assert all(c.n_jobs == 300 for c in configs if c.source.kind == "synthetic")
    assert all(c.n_jobs is None for c in configs if c.source.kind == "bundled")


def test_synthetic_overrides_are_checked():
    with pytest.raises(ConfigError, match="te_duration_medain.*did you mean 'te_duration_median'"):
        CompareConfig(policies=("fifo",), synthetic=(("te_duration_medain", 1.0),))
    with pytest.raises(ConfigError, match="'load' is not a synthetic override"):
        CompareConfig(policies=("fifo",), synthetic={"load": 0.5})
    with pytest.raises(ConfigError, match="twice"):
        CompareConfig(policies=("fifo",), synthetic=(("te_fraction", 0.2), ("te_fraction", 0.3)))
    with pytest.raises(ConfigError, match="te_duration_min"):
        CompareConfig(policies=("fifo",), synthetic={"te_duration_min": -1.0})
    with pytest.raises(ConfigError, match="applies to synthetic workloads"):
        CompareConfig(policies=("fifo",), workload="philly", synthetic={"te_fraction": 0.2})
    config = CompareConfig(policies=("fifo",), synthetic={"te_fraction": 0.2})  # a mapping is taken
    assert config.synthetic == (("te_fraction", 0.2),) and hash(config.source)


def test_unknown_suite():
    with pytest.raises(ConfigError, match=r"Unknown suite 'nope'; expected one of \['shifts'\]"):
        suite_configs("nope", POLICIES)


# --------------------------------------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def tiny():
    """Every entry of the suite, 2 seeds, synthetic workloads capped at 100 jobs."""
    return run_suite("shifts", POLICIES, seeds=2, max_jobs=100, progress=False)


def test_one_row_per_workload_and_policy(tiny):
    rows = tiny.rows()
    assert [(r.entry, r.policy) for r in rows] == [(e.name, p) for e in tiny.entries for p in POLICIES]
    assert tiny.entries[6].name == "paper 20,000 jobs (capped at 100 jobs)"
    assert tiny.entries[8].name == "philly"  # a trace is not capped
    assert all(r.seeds == 2 for r in rows)


def test_rows_reuse_compare_dominance_and_paired_differences(tiny, monkeypatch):
    for entry, comparison, k in zip(tiny.entries, tiny.comparisons, range(len(tiny.entries)), strict=True):
        policies = comparison["policies"]
        values = {p: [objective(s) for s in e["per_seed"]] for p, e in policies.items()}
        for row in tiny.rows()[3 * k : 3 * k + 3]:
            assert row.entry == entry.name
            assert row.objective == pytest.approx(stats.mean(values[row.policy]))
            for ref in suite.REFERENCES:
                if ref == row.policy:
                    assert row.verdict[ref] == "" and math.isnan(row.diff[ref][0])
                    continue
                assert row.verdict[ref] == dominance(policies[row.policy]["paired"][ref])
                d = stats.paired(values[row.policy], values[ref])
                assert row.diff[ref] == (d["mean"], d["ci95"])
    monkeypatch.setattr(suite, "dominance", lambda paired: "from compare")
    fifo = [r for r in tiny.rows() if r.policy == "fifo"]
    assert all(r.verdict == {"fitgpp": "from compare", "k8s": "from compare"} for r in fifo)


@pytest.fixture
def tiny_suite(monkeypatch):
    """A suite of three entries, one a trace, for the tests that run it more than once."""
    entries = (
        SuiteEntry("paper", "the base", n_jobs=80),
        SuiteEntry("paper TE x3", "longer TE", n_jobs=80, synthetic=(("te_duration_median", 2700.0),)),
        SuiteEntry("alibaba contended", "a trace", workload="alibaba2023", cluster="alibaba2023-contended"),
    )
    monkeypatch.setitem(SUITES, "tiny", entries)
    return "tiny"


def test_one_seed_gives_no_verdict(tiny_suite):
    rows = run_suite(tiny_suite, POLICIES, seeds=1, progress=False).rows()
    assert all(v == "" for r in rows for v in r.verdict.values())
    assert all(math.isnan(r.diff[ref][1]) for r in rows for ref in suite.REFERENCES if ref != r.policy)


def test_serial_and_process_executors_give_the_same_suite(tiny_suite):
    serial = run_suite(tiny_suite, POLICIES, seeds=2, progress=False)
    parallel = run_suite(
        tiny_suite, POLICIES, seeds=2, executor=ExecutorConfig(kind="process", workers=2), progress=False
    )
    assert parallel.rows() == serial.rows()
    for a, b in zip(serial.comparisons, parallel.comparisons, strict=True):
        for name in POLICIES:
            assert a["policies"][name]["per_seed"] == b["policies"][name]["per_seed"]


def test_a_suite_entry_runs_what_compare_runs(tiny_suite):
    """The suite's per-seed results of an entry are compare's for the same options."""
    from schedgym.experiments.compare import run_comparison

    result = run_suite(tiny_suite, POLICIES, seeds=2, progress=False)
    alone = run_comparison(
        CompareConfig(policies=POLICIES, seeds=2, n_jobs=80, synthetic={"te_duration_median": 2700.0}), progress=False
    ).summary()
    assert result.comparisons[1]["policies"] == {
        name: {**e, "wall_time_s": result.comparisons[1]["policies"][name]["wall_time_s"]}
        for name, e in alone["policies"].items()
    }
    assert alone["workload"] == "paper (te_duration_median=2700)"


def test_a_suite_on_the_validation_split_runs_what_compare_runs_there(tiny_suite):
    """Model selection across the suite without the test seeds: each entry's validation workloads (synthetic
    seeds 100,000 + i, a trace's validation windows), as compare --split validation runs them."""
    from schedgym.experiments.compare import run_comparison

    configs = suite_configs(tiny_suite, POLICIES, seeds=20, split="validation")
    assert [c.split for c in configs] == ["validation"] * 3
    assert configs[2].seeds == WorkloadSource(workload="alibaba2023").n_evaluation("validation") < 20
    result = run_suite(tiny_suite, POLICIES, seeds=2, split="validation", progress=False)
    assert [e.name for e in result.entries][:2] == ["paper (validation)", "paper TE x3 (validation)"]
    for k, config in ((0, CompareConfig(policies=POLICIES, seeds=2, n_jobs=80, split="validation")),
                      (2, configs[2])):  # fmt: skip
        alone = run_comparison(replace(config, seeds=min(2, config.seeds)), progress=False).summary()
        for name in POLICIES:
            assert result.comparisons[k]["policies"][name]["per_seed"] == alone["policies"][name]["per_seed"]
    test = run_suite(tiny_suite, POLICIES, seeds=2, progress=False).comparisons[0]["policies"]["fitgpp"]
    assert test["per_seed"] != result.comparisons[0]["policies"]["fitgpp"]["per_seed"]


def test_a_suite_from_a_first_seed_runs_fresh_seeds_of_its_synthetic_workloads(tiny_suite):
    """From first_seed other than 0 (held-out seeds for a check after a choice): the synthetic entries only, on
    compare --first-seed's workloads; the traces, which have no seeds beyond their windows, are left out."""
    from schedgym.experiments.compare import run_comparison

    result = run_suite(tiny_suite, POLICIES, seeds=2, first_seed=20, progress=False)
    assert [e.name for e in result.entries] == ["paper (seeds 20-21)", "paper TE x3 (seeds 20-21)"]
    alone = run_comparison(CompareConfig(policies=POLICIES, seeds=2, n_jobs=80, first_seed=20), progress=False)
    for name in POLICIES:
        assert result.comparisons[0]["policies"][name]["per_seed"] == alone.summary()["policies"][name]["per_seed"]
    test = run_suite(tiny_suite, POLICIES, seeds=2, progress=False).comparisons[0]["policies"]["fitgpp"]
    assert test["per_seed"] != result.comparisons[0]["policies"]["fitgpp"]["per_seed"]
    trace = SUITES[tiny_suite][2]
    with pytest.raises(ConfigError, match="a trace has its 5 test windows, no seeds beyond them"):
        trace.config(POLICIES, 2, SimConfig(), first_seed=20)


def test_compare_suite_takes_a_first_seed(tiny_suite, tmp_path):
    # It was refused ("the suite's own choice") though run_suite has taken first_seed since the seventh session.
    out = tmp_path / "s.json"
    argv = ["compare", "--suite", tiny_suite, "--seeds", "2", "--first-seed", "20", "--policies", ",".join(POLICIES)]
    assert main([*argv, "--no-progress", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    result = run_suite(tiny_suite, POLICIES, seeds=2, first_seed=20, progress=False)
    assert [(r["workload"], r["policy"]) for r in data["rows"]] == [(r.entry, r.policy) for r in result.rows()]
    assert {r["workload"] for r in data["rows"]} == {"paper (seeds 20-21)", "paper TE x3 (seeds 20-21)"}


# --------------------------------------------------------------------------------------------- the command
@pytest.fixture(scope="module")
def cli_outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    paths = {"markdown": out / "shifts.md", "json": out / "shifts.json", "plot": out / "shifts.png"}
    argv = ["compare", "--suite", "shifts", "--policies", ",".join(POLICIES), "--seeds", "2", "--jobs", "100"]
    argv += ["--no-progress", *(x for k, p in paths.items() for x in (f"--{k}", str(p)))]
    return main(argv), paths


def test_cli_writes_the_table_markdown_json_and_plot(cli_outputs, tiny, capsys):
    status, paths = cli_outputs
    assert status == 0
    assert paths["markdown"].read_text() == markdown_table(tiny)  # the same runs as the Python API's
    lines = paths["markdown"].read_text().splitlines()
    assert len(lines) == 2 + len(SUITES["shifts"]) * len(POLICIES)
    assert lines[0].startswith("| workload | policy | seeds | objective | vs fitgpp | vs k8s | verdict vs fitgpp")
    data = json.loads(paths["json"].read_text())
    assert data["suite"] == "shifts" and len(data["entries"]) == len(SUITES["shifts"])
    assert [(r["workload"], r["policy"]) for r in data["rows"]] == [(r.entry, r.policy) for r in tiny.rows()]
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--suite", "nope"], "Unknown suite 'nope'"),
        (["--suite", "shifts", "--workload", "philly"], "--workload does not apply to --suite"),
        (["--suite", "shifts", "--workload", "paper"], "--workload does not apply to --suite"),  # the default
        (["--suite", "shifts", "--cluster", "large"], "--cluster does not apply to --suite"),
        (["--suite", "shifts", "--load", "0.9"], "--load does not apply to --suite"),
        (["--suite", "shifts", "--trace", "x.csv"], "--trace does not apply to --suite"),
        (["--suite", "shifts", "--csv", "x.csv"], "--csv does not apply to --suite: it has no suite form"),
        (["--suite", "shifts", "--log-dir", "logs"], "--log-dir does not apply to --suite: it has no suite form"),
        (["--suite", "shifts", "--run-dir", "r"], "--run-dir does not apply to --suite: it has no suite form"),
        (["--suite", "shifts", "--policies", "fifo,nosuch"], "nosuch"),
        (["--suite", "shifts", "--plot", "out.txt"], "--plot 'out.txt'"),
    ],
)
def test_bad_suite_options_are_one_line_errors(extra, expected, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status = main(["compare", "--no-progress", "--markdown", "t.md", *extra])
    assert status == 2
    assert expected in assert_one_line_error(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_failed_suite_leaves_no_output(tmp_path, monkeypatch, capsys):
    """Outputs appear together or not at all: the Markdown is written, then the plot fails, and the Markdown
    is gone."""

    def fail(path, result):
        raise ConfigError("simulated failure")

    monkeypatch.setattr("schedgym.experiments.suite.write_plot", fail)
    argv = ["compare", "--suite", "shifts", "--seeds", "1", "--jobs", "50", "--no-progress", "--policies", "fifo"]
    status = main([*argv, "--markdown", str(tmp_path / "t.md"), "--plot", str(tmp_path / "t.png")])
    assert status == 2 and "simulated failure" in assert_one_line_error(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_the_docs_example_names_real_options():
    commands = re.findall(r"^schedgym compare --suite .*$", DOCS.read_text(), flags=re.M)
    assert commands
    from schedgym.cli import build_parser

    for command in commands:
        build_parser().parse_args(command.split()[1:])


def test_docs_python_example_runs(monkeypatch):
    code = DOCS.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setattr(suite, "run_suite", lambda *a, **k: run_suite(*a, **{**k, "seeds": 1, "max_jobs": 50}))
    exec(compile(code, str(DOCS), "exec"), {"__name__": "docs"})


def test_sim_rules_reach_every_entry():
    configs = suite_configs("shifts", POLICIES, seeds=2, sim=SimConfig(max_preemptions=3))
    assert all(c.sim.max_preemptions == 3 for c in configs)
