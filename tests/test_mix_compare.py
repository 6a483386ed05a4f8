"""``schedgym compare --workload mix``: seed i runs test level i (validation level 100,000 + i with ``--split
validation``) on that level's own cluster, with its estimate noise."""

from __future__ import annotations

import numpy as np
import pytest

from schedgym import registry
from schedgym.cli import main
from schedgym.errors import ConfigError
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.sim.cluster import resolve_cluster
from schedgym.sim.policy import DECLINE, Policy, PreemptionPlan, PreemptionRequest
from schedgym.workloads.distribution import MIX, draw_level, level_seed


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
        ({"first_seed": 99_999, "seeds": 2}, "test level index below 100,000 (level seeds 0..99,999), got 100,000"),
        ({"n_jobs": 100}, "--jobs does not apply to 'mix'"),
        ({"cluster": "small"}, "--cluster does not apply to 'mix'"),
        ({"load": 0.5}, "--load applies to synthetic workloads (paper, realistic); 'mix' draws its load per level"),
    ],
)
def test_compare_mix_refuses_what_does_not_apply(kwargs, message):
    with pytest.raises(ConfigError) as err:
        CompareConfig(policies=("fifo",), workload="mix", **kwargs)
    assert message in str(err.value)


def test_cli_compare_mix_load_gives_the_mix_reason(capsys):
    # The check that names --load ran first and called 'mix' a trace.
    assert main(["compare", "--workload", "mix", "--load", "0.5"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "schedgym: error: --load applies to synthetic workloads (paper, realistic); 'mix' draws its load per level\n"
    )


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


# --- seed i of compare's mix is the environment's level, estimate noise included; the validation split


class NoisyReader(Policy):
    """A rule that, like a learned agent, builds observations with an ``estimate_noise``: it records the
    value each run sees."""

    preempts = False

    def __init__(self) -> None:
        self.estimate_noise = 0.3
        self.seen: list[float] = []

    def reset(self, rng: np.random.Generator | None = None) -> None:
        super().reset(rng)
        self.seen.append(self.estimate_noise)

    def _decide(self, request: PreemptionRequest) -> PreemptionPlan:
        return DECLINE


@pytest.mark.parametrize("split", ["test", "validation"])
def test_compare_mix_seed_is_the_environments_level(split):
    """Seed i of ``compare --workload mix --split S`` runs on exactly the level the environment plays after
    ``reset(options={"workload_seed": level_seed(S, i)})``: its cluster, its jobs and its estimate noise."""
    from schedgym.envs import PreemptionEnv
    from schedgym.experiments.compare import load_workloads

    config = CompareConfig(policies=("fifo",), workload="mix", seeds=2, split=split)
    seeds = load_workloads(config, resolve_cluster("paper"))
    env = PreemptionEnv(workload="mix")
    for i in range(2):
        env.reset(seed=0, options={"workload_seed": level_seed(split, i)})
        assert seeds.cluster_at(i) == env.cluster
        assert seeds[i].jobs == env._workload.jobs  # the environment has no public name for its workload
        assert seeds.estimate_noise_at(i) == env._estimate_noise


@pytest.fixture
def noisy_reader(monkeypatch):
    """A :class:`NoisyReader` registered as ``noisy-reader`` for the test only."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # the test's registration only
    policy = NoisyReader()
    registry.register_policy("noisy-reader", lambda: policy, description="records its estimate noise")
    return policy


def test_compare_mix_gives_each_level_its_estimate_noise(noisy_reader):
    """A policy that reads noisy estimates (a learned agent) gets each level's noise for that level's run,
    as the environment would give it, and its own back afterwards."""
    policy = noisy_reader
    run_comparison(CompareConfig(policies=("noisy-reader",), workload="mix", seeds=3), progress=False)
    assert policy.seen == [draw_level(MIX, i).estimate_noise for i in range(3)]
    assert policy.estimate_noise == 0.3


def test_compare_synthetic_noise_is_the_policys_own(noisy_reader):
    policy = noisy_reader
    run_comparison(CompareConfig(policies=("noisy-reader",), seeds=2, n_jobs=50), progress=False)
    assert policy.seen == [0.3, 0.3]


def test_compare_validation_split_runs_validation_levels(capsys):
    result = run_comparison(CompareConfig(policies=("fifo",), workload="mix", seeds=2, split="validation"))
    assert result.workload_name == "mix (validation)"
    for i, run in enumerate(result.runs["fifo"]):
        level = draw_level(MIX, 100_000 + i)
        np.testing.assert_array_equal(run.capacity_total, level.cluster.total)
        assert len(run.job_ids) == level.workload.n_jobs
    assert main(["compare", "--workload", "mix", "--split", "validation", "--seeds", "1", "--policies", "fifo"]) == 0
    assert "workload mix (validation)" in capsys.readouterr().out


def test_compare_validation_split_of_other_workloads():
    from schedgym.workloads.source import WorkloadSource

    config = CompareConfig(policies=("fifo",), seeds=1, n_jobs=60, split="validation")
    (run,) = run_comparison(config, progress=False).runs["fifo"]
    expected = WorkloadSource(n_jobs=60).evaluation("validation", 0, resolve_cluster("paper"))
    assert run.job_ids == [j.job_id for j in expected.jobs]
    assert CompareConfig(policies=("fifo",), workload="philly", split="validation").seeds == 3  # its windows
    with pytest.raises(ConfigError, match="has 3 validation windows"):
        CompareConfig(policies=("fifo",), workload="philly", split="validation", seeds=4)
    with pytest.raises(ConfigError, match="Expected a validation level index below 900,000"):
        CompareConfig(policies=("fifo",), workload="mix", split="validation", first_seed=899_999, seeds=2)
    with pytest.raises(ConfigError, match="Expected split in"):
        CompareConfig(policies=("fifo",), split="train")
