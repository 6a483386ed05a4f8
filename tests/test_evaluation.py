"""The shared pieces of the experiments: the figures declared once (schedgym.experiments.figures) and the one
evaluation function (schedgym.experiments.evaluation) that compare, sweep and training call."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedgym.envs.config import EnvConfig
from schedgym.errors import ConfigError
from schedgym.experiments import compare
from schedgym.experiments.compare import CompareConfig, dominance, load_workloads, run_comparison
from schedgym.experiments.evaluation import evaluate_policy, per_run
from schedgym.experiments.figures import BE_P99, HEADLINE, HEADLINE_KEYS, TE_P95, ClassFigure, headline_figures
from schedgym.experiments.runner import episode_return, run_policy, run_rng
from schedgym.registry import make_policy
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.job import JobClass
from schedgym.workloads.source import WorkloadSource

# --- the figures


def test_the_headline_figures_and_their_names():
    assert HEADLINE_KEYS == ("te_p95", "be_p50", "be_p95", "be_p99")
    assert [f.label for f in HEADLINE] == ["TE p95", "BE p50", "BE p95", "BE p99"]
    assert [f.column for f in HEADLINE] == ["te_slowdown_p95", "be_slowdown_p50", "be_slowdown_p95", "be_slowdown_p99"]
    assert ClassFigure(JobClass.BE, "wait_mean").label == "BE wait"


def test_a_figure_is_validated():
    with pytest.raises(ConfigError, match=r"Expected statistic in \[.*'slowdown_p95'.*\], got 'slowdown_p42'"):
        ClassFigure(JobClass.TE, "slowdown_p42")
    with pytest.raises(ConfigError, match="Expected job_class a JobClass, got 'te'"):
        ClassFigure("te", "slowdown_p95")  # type: ignore[arg-type]


def _paired(**diffs: tuple[float, float]) -> dict:
    """A ``paired[ref]`` entry: 0 +- 0.1 on every headline figure except those given as (mean, ci95)."""
    out: dict = {"te": {}, "be": {}}
    for f in HEADLINE:
        mean, half = diffs.get(f.key, (0.0, 0.1))
        out[f.cls][f.statistic] = {"mean": mean, "ci95": half}
    return out


def test_the_declaration_drives_the_dominance_verdict(monkeypatch):
    worse_on_be_p99 = _paired(te_p95=(-0.5, 0.1), be_p99=(3.0, 1.0))
    assert dominance(worse_on_be_p99) == "mixed"
    # Judged on TE p95 alone, the BE tail no longer counts against it.
    monkeypatch.setattr(compare, "HEADLINE", (TE_P95,))
    assert dominance(worse_on_be_p99) == "dominates"
    monkeypatch.setattr(compare, "HEADLINE", (BE_P99,))
    assert dominance(worse_on_be_p99) == "dominated"


# --- the evaluation


@pytest.fixture(scope="module")
def comparison():
    config = CompareConfig(policies=("fitgpp", "random"), seeds=2, first_seed=3, n_jobs=150)
    return config, run_comparison(config, progress=False)


def test_evaluate_policy_gives_the_figures_compare_reports(comparison):
    config, result = comparison
    cluster = resolve_cluster(config.source.default_cluster)
    workloads = load_workloads(config, cluster)
    per_seed = result.summary()["policies"]
    for spec in config.policies:  # a deterministic rule, and a randomised one (its generator is the seed's)
        runs = evaluate_policy(make_policy(spec), cluster, list(workloads), config.seed_list, config.sim)
        assert [r.seed for r in runs] == [3, 4]
        for run, compared, summary in zip(runs, result.runs[spec], per_seed[spec]["per_seed"], strict=True):
            assert run.figures() == {f.key: f.in_summary(summary) for f in HEADLINE}
            assert run.figures() == headline_figures(compared)
            np.testing.assert_array_equal(run.result.slowdown, compared.slowdown)
            assert run.episode_return is None and run.n_illegal == 0


def test_evaluate_policy_leaves_out_a_windows_warm_up_but_returns_over_every_job():
    source = WorkloadSource(workload="philly")
    cluster = resolve_cluster(source.default_cluster)
    window = source.evaluation("validation", 0, cluster, count=1)
    assert window.measured is not None and not all(window.measured)  # a window with warm-up jobs
    env = EnvConfig(workload="philly")
    (run,) = evaluate_policy(make_policy("fitgpp"), cluster, [window], env=env)
    full = run_policy(make_policy("fitgpp"), cluster, window, rng=run_rng(0))
    assert len(run.result.job_ids) == int(np.sum(window.measured)) < len(full.job_ids)
    assert run.episode_return == episode_return(full, env)


def test_per_run_lays_the_runs_side_by_side():
    source = WorkloadSource(workload="paper", n_jobs=100)
    cluster = resolve_cluster(source.default_cluster)
    workloads = [source.evaluation("validation", i, cluster) for i in range(2)]
    runs = evaluate_policy(make_policy("fifo"), cluster, workloads)
    columns = per_run(runs)
    assert list(columns) == ["return", "illegal", *HEADLINE_KEYS]
    assert all(math.isnan(r) for r in columns["return"])  # no environment configuration given
    assert columns["be_p99"] == [r.figures()["be_p99"] for r in runs]


def test_one_seed_per_workload():
    source = WorkloadSource(workload="paper", n_jobs=50)
    cluster = resolve_cluster(source.default_cluster)
    workload = source.evaluation("validation", 0, cluster)
    with pytest.raises(ConfigError, match=r"Expected one seed per workload \(1\), got 2"):
        evaluate_policy(make_policy("fifo"), cluster, [workload], [0, 1])


def test_a_trace_file_with_fewer_validation_windows_than_asked_says_how_many_and_where(tmp_path):
    # The message said "1 distinct validation windows; 1 was asked for", naming neither the limit nor the option.
    path = tmp_path / "t.csv"
    path.write_text("job_id,submit_time,duration,gpus,class,grace_period\nb1,0,1000,8,BE,10\nt1,100,100,8,TE,0\n")
    source = WorkloadSource(workload=None, trace=str(path), n_jobs=2)
    cluster = resolve_cluster("small")
    assert source.evaluation("validation", 0, cluster, count=5).jobs  # the one window there is
    with pytest.raises(ConfigError, match=r"1 distinct validation windows of 2 jobs .* at most 1 \(schedgym train"):
        source.evaluation("validation", 1, cluster, count=5)
