"""Statistics of a comparison: the t table against scipy, intervals by hand, and no fake intervals for a
replayed trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.stats import ci95, mean, paired, t975


def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in [*range(1, 260), 500, 1000, 10_000]:
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=6e-5), df
    assert math.isnan(t975(0))


def test_ci95_by_hand():
    # [1, 2, 3]: mean 2, sample sd 1, n 3, t(0.975, 2) = 4.3027 -> half-width 4.3027 / sqrt(3) = 2.4842.
    assert ci95([1.0, 2.0, 3.0]) == pytest.approx(4.3027 / math.sqrt(3))
    assert math.isnan(ci95([5.0]))
    assert ci95([2.0, 2.0, 2.0]) == 0.0
    assert ci95([1.0, float("nan"), 3.0]) == pytest.approx(12.7062)  # NaN skipped: sd sqrt(2), n 2


def test_mean_and_paired_skip_nan():
    assert mean([1.0, float("nan"), 3.0]) == 2.0
    assert math.isnan(mean([float("nan")]))
    d = paired([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])  # differences 2, 3, 4
    assert d["mean"] == 3.0 and d["ci95"] == pytest.approx(4.3027 / math.sqrt(3))


def _trace(tmp_path, n=40):
    rows = ["job_id,submit_time,duration,gpus,class,grace_period"]
    for i in range(n):
        cls = "TE" if i % 3 == 0 else "BE"
        rows.append(f"j{i},{i * 30},{600 + 97 * (i % 7)},{(i % 4) + 1},{cls},10")
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_a_replayed_trace_reports_no_interval_for_deterministic_policies(tmp_path):
    config = CompareConfig(policies=("fifo", "fitgpp", "random"), trace=_trace(tmp_path), cluster="small", seeds=4)
    summary = run_comparison(config, progress=False).summary()
    assert summary["workloads_vary"] is False
    for name in ("fifo", "fitgpp"):
        assert math.isnan(summary["policies"][name]["ci95"]["te"]["slowdown_p95"])
        assert math.isnan(summary["policies"]["fitgpp"]["paired"]["fifo"]["be"]["slowdown_p95"]["ci95"])
    # Every seed saw the same jobs: the deterministic policies' per-seed figures are identical.
    per_seed = [s["be"]["slowdown_p95"] for s in summary["policies"]["fifo"]["per_seed"]]
    assert len(set(per_seed)) == 1


def test_synthetic_seeds_vary_and_get_intervals():
    summary = run_comparison(CompareConfig(policies=("fifo",), seeds=3, n_jobs=300), progress=False).summary()
    assert summary["workloads_vary"] is True
    per_seed = [s["te"]["slowdown_p95"] for s in summary["policies"]["fifo"]["per_seed"]]
    assert summary["policies"]["fifo"]["ci95"]["te"]["slowdown_p95"] == pytest.approx(ci95(per_seed))
    assert np.isfinite(summary["policies"]["fifo"]["ci95"]["te"]["slowdown_p95"])


def test_dominance_verdict_over_the_four_figures():
    from schedgym.experiments.compare import dominance

    def paired(**diffs):
        base = {"te": {"slowdown_p95": {"mean": 0.0, "ci95": 0.1}}, "be": {}}
        for f in ("slowdown_p50", "slowdown_p95", "slowdown_p99"):
            base["be"][f] = {"mean": 0.0, "ci95": 0.1}
        for key, (m, half) in diffs.items():
            cls, f = key.split("_", 1)
            base[cls][f] = {"mean": m, "ci95": half}
        return base

    assert dominance(paired()) == "equal"
    assert dominance(paired(te_slowdown_p95=(-0.5, 0.1))) == "dominates"  # better on one, no worse on any
    assert dominance(paired(be_slowdown_p99=(0.5, 0.1))) == "dominated"
    assert dominance(paired(te_slowdown_p95=(-0.5, 0.1), be_slowdown_p99=(3.0, 1.0))) == "mixed"
    # A difference whose interval reaches 0 counts as neither; one without an interval is not judged.
    assert dominance(paired(te_slowdown_p95=(-0.5, 0.5))) == "equal"
    assert dominance(paired(te_slowdown_p95=(-0.5, float("nan")))) == "equal"
