"""``schedgym compare --workload mix``: seed i runs test level i on that level's own cluster."""

from __future__ import annotations

import numpy as np
import pytest

from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.workloads.distribution import MIX, draw_level


def test_compare_mix_runs_test_levels_on_their_clusters():
    result = run_comparison(CompareConfig(policies=("fifo", "fitgpp"), workload="mix", seeds=2))
    assert result.workload_name == "mix"
    for label in ("fifo", "fitgpp"):
        runs = result.runs[label]
        assert len(runs) == 2
        for seed, run in enumerate(runs):
            level = draw_level(MIX, seed)
            np.testing.assert_array_equal(run.capacity_total, level.cluster.total)
            assert len(run.job_ids) == level.workload.n_jobs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"first_seed": 99_999, "seeds": 2}, "Expected a test level seed in 0..99,999, got 100,000"),
        ({"n_jobs": 100}, "--jobs does not apply to 'mix'"),
        ({"cluster": "small"}, "--cluster does not apply to 'mix'"),
    ],
)
def test_compare_mix_refuses_what_does_not_apply(kwargs, message):
    with pytest.raises(ConfigError) as err:
        CompareConfig(policies=("fifo",), workload="mix", **kwargs)
    assert message in str(err.value)


def test_cli_compare_mix_two_levels(capsys):
    assert main(["compare", "--workload", "mix", "--seeds", "2", "--policies", "fifo,fitgpp"]) == 0
    out = capsys.readouterr().out
    assert "workload mix, cluster mix (each level its own), seeds 0..1" in out


def test_docs_mix_snippet_runs(capsys):
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "workloads.md").read_text()
    section = doc[doc.index("## `mix`") :]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(code, "docs/workloads.md:mix", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    seeds = [int(line.split("]")[0].removeprefix("mix[")) for line in lines[:3]]
    assert all(1_000_000 <= s < 1_000_200 for s in seeds)  # num_levels=200: training levels only
