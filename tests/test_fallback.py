"""agents.fallback.SmallClusterFallback and the bundled agent built on it, `dagger-mix`: the rule decides on
clusters of at most max_nodes nodes and the agent elsewhere, each run for run as it does alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import agents.learned
from agents.fallback import SmallClusterFallback
from agents.learned import BUNDLED, LearnedPolicy, load_agent
from schedgym.errors import SchedGymError
from schedgym.experiments.runner import run_policy, run_rng
from schedgym.registry import make_policy
from schedgym.sim import cluster_preset
from schedgym.workloads import generate, preset


def _runs(policies: dict, cluster: str) -> dict:
    spec = cluster_preset(cluster)
    wl = generate(preset("paper", n_jobs=300), spec, np.random.default_rng(np.random.SeedSequence([0, 0])))
    return {name: run_policy(p, spec, wl, rng=run_rng(0)) for name, p in policies.items()}


def _same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("completion", "first_start", "preemptions"))


@pytest.mark.parametrize(("cluster", "same_as"), [("small", "fitgpp"), ("paper", "agent")])
def test_dagger_mix_is_fitgpp_on_4_nodes_and_its_network_on_16(cluster, same_as):
    bundled = make_policy("dagger-mix")
    assert isinstance(bundled, SmallClusterFallback) and bundled.name == "dagger-mix"
    assert (bundled.rule.name, bundled.max_nodes, bundled.agent.max_candidates) == ("fitgpp", 8, 64)
    alone = load_agent(BUNDLED["dagger-mix"], name="alone")  # the network without the fallback
    assert isinstance(alone, LearnedPolicy)
    runs = _runs({"fitgpp": make_policy("fitgpp"), "agent": alone, "bundled": bundled}, cluster)
    assert not _same(runs["fitgpp"], runs["agent"])  # so the test can tell
    assert _same(runs["bundled"], runs[same_as])


def test_a_randomised_rule_draws_as_it_does_alone():
    runs = _runs({"wrapped": SmallClusterFallback(make_policy("dagger"), make_policy("random"), 8),
                  "random": make_policy("random"), "fitgpp": make_policy("fitgpp")}, "small")  # fmt: skip
    assert _same(runs["wrapped"], runs["random"]) and not _same(runs["random"], runs["fitgpp"])


def test_the_threshold_is_inclusive():
    # the 4-node cluster: the rule at max_nodes 4, the agent at 3
    agent = make_policy("dagger")
    runs = _runs({"at": SmallClusterFallback(make_policy("dagger"), make_policy("fitgpp"), 4),
                  "below": SmallClusterFallback(make_policy("dagger"), make_policy("fitgpp"), 3),
                  "fitgpp": make_policy("fitgpp"), "agent": agent}, "small")  # fmt: skip
    assert _same(runs["at"], runs["fitgpp"]) and _same(runs["below"], runs["agent"])
    assert not _same(runs["fitgpp"], runs["agent"])


@pytest.mark.parametrize(("max_nodes", "needle"), [(-1, ">= 0"), (2.0, "integer"), (True, "integer")])
def test_a_bad_threshold_is_refused(max_nodes, needle):
    with pytest.raises(SchedGymError, match=needle):
        SmallClusterFallback(make_policy("dagger"), make_policy("fitgpp"), max_nodes)


def test_a_rule_with_another_queue_is_refused():
    with pytest.raises(SchedGymError, match="the agent queues by priority, the rule 'fifo' by fifo"):
        SmallClusterFallback(make_policy("dagger"), make_policy("fifo"), 8)


def test_a_manifest_fallback_to_a_learned_policy_is_refused(monkeypatch):
    entry = dataclasses.replace(agents.learned.BUNDLED_AGENTS["dagger-mix"], fallback=("dagger", 8))
    monkeypatch.setitem(agents.learned.BUNDLED_AGENTS, "dagger-mix", entry)
    with pytest.raises(SchedGymError, match="falls back to 'dagger', which is not a rule"):
        make_policy("dagger-mix")
