"""The plan mode's native path: the plan-level protocol in C++ (``PlanCore``, ``schedgym/sim/native/plan_core.cpp``,
driven by ``NativePlanBackend``) against the specification, ``schedgym/decision/plan_mode.py`` (with
``plans.py`` and ``scalefree.py``).

Differential: a reference environment and a native-engine environment (which decides in C++) are stepped with
the same random legal actions, and every observation (bit for bit), mask, option (plan and proposers), reward,
info, the episode ends and the final per-job results must be identical. The reference is the Python engine in
the module's native run, and the native engine with the Python protocol (``protocol="python"``) in its python
run, which isolates the protocol from the engine. Configurations: the paper workload, the 4-node "small"
cluster with gangs, the ``realistic`` workload, ``max_plans`` small enough to cut options, queue rows from 0 to
8, hypothesis-drawn small workloads (heterogeneous clusters, fractional demands, gangs) and simulator rules, a
node with more candidates than the fewest-victims search takes, and Python >= 3.12's compensated ``sum()``.
Copies (pickle, deepcopy, ``Simulator.clone``) made mid-episode must continue identically; the bound class
checks its inputs and the layout it was built with.
"""

from __future__ import annotations

import builtins
import copy
import math
import pickle
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import be, cluster, small_workloads, te
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.decision import features, scalefree
from schedgym.decision.backend import (
    DecisionBackend,
    DecisionSpec,
    NativePlanBackend,
    NativePlanDecision,
    PythonBackend,
    open_backend,
)
from schedgym.decision.plan_mode import PlanDecision
from schedgym.envs import EnvConfig, PreemptionEnv
from schedgym.errors import IllegalDecisionError
from schedgym.sim import JobSpec, SimConfig
from schedgym.sim import native_engine as native_engine_module
from schedgym.sim.cluster import ClusterSpec, resolve_cluster
from schedgym.sim.job import JobTable
from schedgym.sim.native_engine import PlanNativeSimulator
from schedgym.sim.simulator import native_available
from schedgym.workloads import generate, preset

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INFO_KEYS = (
    "sim_time",
    "interval",
    "te_job",
    "n_candidates",
    "decisions",
    "preemptions",
    "reward_te",
    "reward_be",
    "reward_preemption",
)
PLAN = {"action_mode": "plan", "observation_version": 2}


@pytest.fixture(scope="module")
def reference_engine(engine: str) -> str:
    """The engine of the reference: the Python engine in the native run, the native one (with the Python
    protocol) in the python run."""
    if not native_available():
        pytest.skip("the native engine is not built")
    return "python" if engine == "native" else "native"


@pytest.fixture(scope="module")
def make_pair(reference_engine: str) -> Callable[[dict], tuple[PreemptionEnv, PreemptionEnv]]:
    """``make_pair(env kwargs) -> (reference, native)``: the same plan-mode environment twice, the second deciding
    in C++."""

    def _make(kwargs: dict) -> tuple[PreemptionEnv, PreemptionEnv]:
        kwargs = {**PLAN, **kwargs}
        sim = dict(kwargs.pop("sim", {}))
        ref = PreemptionEnv(sim={**sim, "engine": reference_engine}, **kwargs)
        ref._protocol = "python"
        return ref, PreemptionEnv(sim={**sim, "engine": "native"}, **kwargs)

    return _make


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d: Path = tmp_path_factory.mktemp("clusters")
    texts = {
        "two": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\n",
        "mixed": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,4,32,256\nn2,8,64,512\nn3,6,48,384\n",
    }
    out = {"small": "small", "paper": "paper"}
    for name, text in texts.items():
        path = d / f"{name}.csv"
        path.write_text(text)
        out[name] = str(path)
    return out


# ----------------------------------------------------------------------------------------------------------
# Lock-step comparison
# ----------------------------------------------------------------------------------------------------------


def same_bits(a: np.ndarray, b: np.ndarray, where: str) -> None:
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape, where
    diff = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
    assert diff.size == 0, f"{where}: observations differ at {diff.tolist()}: {a[diff]} vs {b[diff]}"


def options_of(backend: DecisionBackend) -> list[tuple]:
    view = backend.view()
    if view is None:
        return []
    assert isinstance(view, PlanDecision)
    return [(o.plan, o.sources) for o in view.options]


def assert_same_backends(ref: DecisionBackend, fast: DecisionBackend, where: str) -> None:
    assert isinstance(fast, NativePlanBackend), "the native plan path is not active"
    assert isinstance(ref, PythonBackend)
    same_bits(ref.observe(), fast.observe(), where)
    assert np.array_equal(ref.mask(), fast.mask()), where
    assert (ref.job, ref.n_rows, ref.n_decisions, ref.n_steps) == (
        fast.job,
        fast.n_rows,
        fast.n_decisions,
        fast.n_steps,
    )
    assert options_of(ref) == options_of(fast), where
    assert ref.sim.now == fast.sim.now and ref.sim.n_preemptions == fast.sim.n_preemptions, where


def assert_same_step(ref: PreemptionEnv, fast: PreemptionEnv, a: tuple, b: tuple, where: str) -> None:
    """``a`` and ``b``: (obs, info) after reset, or (obs, reward, terminated, truncated, info) after a step."""
    same_bits(a[0], b[0], where)
    assert a[1:-1] == b[1:-1], where  # reward, terminated, truncated
    info_a, info_b = a[-1], b[-1]
    assert np.array_equal(info_a["action_mask"], info_b["action_mask"]), where
    assert info_b["action_mask"].dtype == bool
    for key in INFO_KEYS:
        assert info_a[key] == info_b[key], (where, key, info_a[key], info_b[key])
    assert [(o.plan, o.sources) for o in ref.plan_options] == [(o.plan, o.sources) for o in fast.plan_options], where
    assert_same_backends(ref.backend, fast.backend, where)


def assert_same_results(ref_sim, fast_sim) -> None:
    a, b = ref_sim.result(), fast_sim.result()
    for field in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert a.n_preemptions == b.n_preemptions
    seg = [(s.job, s.node, s.start, s.end, s.end_reason) for s in a.segments]
    assert seg == [(s.job, s.node, s.start, s.end, s.end_reason) for s in b.segments]
    assert ref_sim.accrued == fast_sim.accrued and ref_sim.accrued_bounded == fast_sim.accrued_bounded


def pick(rng: np.random.Generator, mask: np.ndarray, p_wait: float) -> int:
    legal = np.flatnonzero(mask)
    return int(rng.choice(legal)) if len(legal) == 1 or rng.random() < p_wait else int(rng.choice(legal[1:]))


def lockstep(
    ref: PreemptionEnv,
    fast: PreemptionEnv,
    *,
    seed: int,
    action_seed: int,
    options: dict | None = None,
    p_wait: float = 0.2,
) -> int:
    """Reset both with ``seed`` and step them with the same random legal actions to the end; returns the number of
    steps."""
    a = ref.reset(seed=seed, options=options)
    b = fast.reset(seed=seed, options=options)
    assert_same_step(ref, fast, a, b, "reset")
    rng = np.random.default_rng(action_seed)
    steps, terminated = 0, False
    while not terminated:
        action = pick(rng, a[-1]["action_mask"], p_wait)
        a = ref.step(action)
        b = fast.step(action)
        steps += 1
        assert_same_step(ref, fast, a, b, f"step {steps} (action {action})")
        terminated = a[2]
    assert fast.pending_request is None and fast.decision is None and not b[0].any()
    assert_same_results(ref.sim, fast.sim)
    return steps


def backend_pair(
    cl: ClusterSpec, jobs: list[JobSpec], reference_engine: str, spec: DecisionSpec, noise: float = 0.3, **config
) -> tuple[DecisionBackend, DecisionBackend]:
    table = JobTable.from_specs(jobs)
    ref = open_backend(
        cl,
        table,
        SimConfig(engine=reference_engine, **config),
        spec=spec,
        estimate_noise=noise,
        rng=np.random.default_rng(0),
        protocol="python",
    )
    fast = open_backend(
        cl, table, SimConfig(engine="native", **config), spec=spec, estimate_noise=noise, rng=np.random.default_rng(0)
    )
    return ref, fast


def backend_lockstep(ref: DecisionBackend, fast: DecisionBackend, action_seed: int, p_wait: float = 0.3) -> int:
    rng = np.random.default_rng(action_seed)
    assert_same_backends(ref, fast, "start")
    steps = 0
    while not ref.ended:
        action = pick(rng, ref.mask(), p_wait)
        assert ref.step(action) == fast.step(action)
        steps += 1
        assert ref.take_accrued(False) == fast.take_accrued(False)
        assert ref.ended == fast.ended
        assert_same_backends(ref, fast, f"step {steps} (action {action})")
    assert_same_results(ref.sim, fast.sim)
    return steps


# ----------------------------------------------------------------------------------------------------------
# Configurations
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "seed"),
    [
        ({"n_jobs": 1000}, 1),  # PreemptionPlan-v1
        ({"n_jobs": 1000}, 7),
        ({"n_jobs": 1000, "max_plans": 2}, 2),  # options cut down to wait and one plan
        ({"n_jobs": 1000, "max_plans": 3, "queue_rows": 0}, 3),
        ({"n_jobs": 1000, "queue_rows": 8, "estimate_noise": 0.0}, 4),
        ({"n_jobs": 1000, "sim": {"max_preemptions": 3, "restart_overhead": 30.0}}, 5),
        ({"n_jobs": 1000, "sim": {"queue": "fifo", "placement": "first-fit"}, "estimate_noise": 1.5}, 6),
        ({"n_jobs": 1500, "workload": "realistic"}, 8),
        ({"n_jobs": 1000, "workload": "realistic", "max_plans": 4, "queue_rows": 2}, 9),
        ({"n_jobs": 600, "cluster": "small", "reward": "bounded_slowdown", "preemption_cost": 0.5}, 10),
    ],
)
def test_busy_episodes_are_identical(make_pair, kwargs, seed):
    ref, fast = make_pair(kwargs)
    steps = 0
    for p_wait in (0.1, 0.6):
        steps += lockstep(ref, fast, seed=seed, action_seed=seed, p_wait=p_wait)
    assert steps > 10


@pytest.mark.parametrize("max_plans", [2, 5, 24])
@pytest.mark.parametrize("seed", [0, 1])
def test_gangs_on_the_small_cluster_are_identical(make_pair, cluster_files, seed, max_plans):
    """The 4-node "small" preset under a hot workload whose TE and BE jobs are gangs over 2 to 4 nodes: rule plans
    over several nodes, gang victims, no per-node options for gangs."""
    ref, fast = make_pair({"cluster": "small", "n_jobs": 300, "max_plans": max_plans, "sim": {"max_preemptions": 2}})
    synth = replace(
        preset("paper", n_jobs=300),
        load=3.0,
        te_fraction=0.5,
        te_gpus=((4, 0.3), (8, 0.3), (16, 0.2), (24, 0.2)),
        gpus_per_node=8.0,
    )
    wl = generate(synth, ref.cluster, np.random.default_rng(seed))
    assert any(j.gang_size > 1 for j in wl.jobs)
    steps = lockstep(ref, fast, seed=seed, action_seed=seed + 10, options={"workload": wl}, p_wait=0.2)
    assert steps > 10 and fast.sim.n_preemptions > 0


@st.composite
def setups(draw):
    """(env kwargs, hot workload parameters, gang-heavy, reset seed, action seed, p_wait)."""
    kwargs = dict(
        cluster=draw(st.sampled_from(["small", "two", "mixed"])),
        n_jobs=draw(st.integers(30, 150)),
        max_plans=draw(st.sampled_from([2, 3, 4, 8, 24])),
        queue_rows=draw(st.sampled_from([0, 1, 4])),
        sim=dict(
            max_preemptions=draw(st.sampled_from([1, 2, 3, 0, 5])),
            restart_overhead=draw(st.sampled_from([0.0, 5.0, 60.0])),
            queue=draw(st.sampled_from(["fifo", "priority"])),
            backfill=draw(st.booleans()),
            placement=draw(st.sampled_from(["best-fit", "first-fit"])),
        ),
        estimate_noise=draw(st.sampled_from([0.0, 0.3, 1.5])),
        reward=draw(st.sampled_from(["slowdown", "bounded_slowdown"])),
        preemption_cost=draw(st.sampled_from([0.0, 0.5])),
    )
    hot = dict(
        load=draw(st.sampled_from([2.0, 3.0, 6.0])),
        te_fraction=draw(st.sampled_from([0.3, 0.5, 0.7])),
        be_duration_median=draw(st.sampled_from([900.0, 3600.0])),
        be_duration_min=draw(st.sampled_from([600.0, 5.0])),
        grace_min=draw(st.sampled_from([5.0, 0.0])),
    )
    gangs = draw(st.booleans()) and kwargs["cluster"] != "two"
    return (
        kwargs,
        hot,
        gangs,
        draw(st.integers(0, 2**31 - 1)),
        draw(st.integers(0, 2**31 - 1)),
        draw(st.sampled_from([0.0, 0.2, 0.6])),
    )


@SETTINGS
@given(setup=setups())
def test_random_configurations_are_identical(make_pair, cluster_files, setup):
    kwargs, hot, gangs, seed, action_seed, p_wait = setup
    kwargs = {**kwargs, "cluster": cluster_files[kwargs["cluster"]]}
    ref, fast = make_pair(kwargs)
    synth = replace(preset("paper", n_jobs=kwargs["n_jobs"]), **hot)
    if gangs:  # TE gangs over 2-3 nodes, BE gangs too
        synth = replace(synth, te_gpus=((4, 0.4), (8, 0.2), (12, 0.2), (16, 0.2)), gpus_per_node=4.0)
    wl = generate(synth, ref.cluster, np.random.default_rng(seed))
    lockstep(ref, fast, seed=seed, action_seed=action_seed, options={"workload": wl}, p_wait=p_wait)


@SETTINGS
@given(
    workload=small_workloads(),
    max_plans=st.sampled_from([2, 3, 6, 24]),
    queue_rows=st.sampled_from([0, 1, 3]),
    max_preemptions=st.sampled_from([0, 1, 2, 4]),
    noise=st.sampled_from([0.0, 0.3]),
    action_seed=st.integers(0, 2**31 - 1),
)
def test_small_random_workloads_are_identical(
    reference_engine, workload, max_plans, queue_rows, max_preemptions, noise, action_seed
):
    """Heterogeneous clusters of 1-5 nodes (fractional GPUs, nodes without CPUs or memory), gangs of both classes,
    equal submit times: the backends in lockstep."""
    cl, jobs = workload
    spec = DecisionSpec(mode="plan", version=2, max_plans=max_plans, queue_rows=queue_rows)
    ref, fast = backend_pair(cl, jobs, reference_engine, spec, noise, max_preemptions=max_preemptions)
    backend_lockstep(ref, fast, action_seed)


def crowded_node_jobs(n_small: int) -> list[JobSpec]:
    """One 16-GPU node running ``n_small`` 1-GPU BE jobs (grace periods 0 to 9, and 16 - n_small GPUs of one
    big BE job), then TE jobs of 3, 12 and 16 GPUs: deficits that few, many or all candidates cover."""
    jobs = [be(f"s{i}", 0, 5000, 1, grace=float((7 * i) % 10)) for i in range(n_small)]
    if n_small < 16:
        jobs.append(be("big", 0, 5000, 16 - n_small, grace=3))
    jobs += [te("t3", 10, 100, 3), te("t12", 20, 100, 12), te("t16", 30, 100, 16)]
    return jobs


@pytest.mark.parametrize("n_small", [11, 12, 13, 16])
def test_the_fewest_victims_search_has_the_same_limit(reference_engine, n_small):
    """A node with more candidates than MAX_SUBSET_CANDIDATES (12) gets no per-node option, on both."""
    spec = DecisionSpec(mode="plan", version=2, max_plans=24, queue_rows=2)
    ref, fast = backend_pair(cluster(16), crowded_node_jobs(n_small), reference_engine, spec, noise=0.0)
    per_node = any("per_node" in s for _, s in options_of(fast))
    assert per_node == (n_small + (n_small < 16) <= 12)
    backend_lockstep(ref, fast, action_seed=n_small, p_wait=0.0)


def neumaier_sum(items: Iterable) -> object:
    """CPython >= 3.12's sum() with its default start 0: ints summed exactly; from the first float on,
    Neumaier's compensated summation (builtin_sum_impl), the compensation added at the end if finite and not 0."""
    values = list(items)
    if all(isinstance(v, int) for v in values):
        return builtins.sum(values)
    f, c = 0 + values[0], 0.0
    for x in values[1:]:
        x = float(x)
        t = f + x
        c += (f - t) + x if abs(f) >= abs(x) else (x - t) + f
        f = t
    return f + c if c and math.isfinite(c) else f


@SETTINGS
@given(
    values=st.lists(
        st.one_of(
            st.floats(-1e6, 1e6), st.floats(0, 1e-3), st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 2.0**53, -0.0])
        ),
        min_size=1,
        max_size=12,
    )
)
def test_the_cores_sum_is_pythons(values):
    """The core sums floats as this Python's sum() does, and as 3.12's compensated sum() does when asked to."""
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    a = np.array(values, dtype=np.float64)
    assert _engine.python_sum(a, False).hex() == float(sum(values)).hex()
    assert _engine.python_sum(a, True).hex() == float(neumaier_sum(values)).hex()
    assert _engine.python_sum(a, native_engine_module.COMPENSATED_SUM).hex() == float(sum(values)).hex()


@SETTINGS
@given(
    values=st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 1e-3, 7e5]) | st.floats(1e-6, 1e7), max_size=80),
    limit=st.sampled_from([0, 4096]),
)
def test_the_running_medians_are_computed_alike(values, limit):
    """WorkloadScales takes its running medians from C++ where the engine is built: the same values as
    scalefree.prefix_lower_medians (either way of computing them)."""
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    a = np.array(values, dtype=np.float64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scalefree, "_INSORT_LIMIT", limit)
        expected = scalefree.prefix_lower_medians(a)
    got = _engine.prefix_lower_medians(a)
    assert got.dtype == np.float64 and got.tobytes() == expected.tobytes()
    assert scalefree._PREFIX_LOWER_MEDIANS is _engine.prefix_lower_medians


def test_pythons_compensated_sum_is_followed(reference_engine, monkeypatch):
    """From Python 3.12 on, sum() of floats is compensated: the core sums as the Python running it does (here both
    sides are switched to 3.12's sum, whatever this interpreter is)."""
    assert neumaier_sum([0.1] * 10) == 1.0 and builtins.sum([0.1] * 10) != 1.0
    monkeypatch.setattr(scalefree, "sum", neumaier_sum, raising=False)
    monkeypatch.setattr(native_engine_module, "COMPENSATED_SUM", True)
    spec = DecisionSpec(mode="plan", version=2, max_plans=24, queue_rows=4)
    cl = resolve_cluster("paper")
    synth = replace(preset("paper", n_jobs=1000), load=3.0, be_duration_min=5.0)
    wl = generate(synth, cl, np.random.default_rng(3))
    ref, fast = backend_pair(cl, list(wl.jobs), reference_engine, spec)
    assert backend_lockstep(ref, fast, action_seed=3, p_wait=0.1) > 50


def test_plan_policies_agree_on_the_option_view(make_pair):
    """The decision view of the native path is a PlanDecision: options, mask, observation, check, choose and
    index_of as the Python protocol's; illegal actions give the same errors."""
    ref, fast = make_pair({"n_jobs": 1000, "max_plans": 4})
    ref.reset(seed=1)
    fast.reset(seed=1)
    da, db = ref.decision, fast.decision
    assert isinstance(db, NativePlanDecision) and isinstance(da, PlanDecision)
    assert db.offers_choice and db.n_rows == da.n_rows == len(fast.plan_options) - 1
    assert db.request is not None and db.request.job.job_id == da.request.job.job_id
    assert np.array_equal(da.mask(), db.mask())
    same_bits(da.observe(), db.observe(), "view")
    assert (db.rows, db.chosen, db.targets) == ([], [], [])
    for i, option in enumerate(da.options):
        assert db.choose(i) == da.choose(i) == option.plan
        assert db.index_of(option.plan) == da.index_of(option.plan) == i
    n = da.n_rows
    for bad in (n + 1, -1, 1.5, "1", None, [1], True, float("nan")):
        with pytest.raises(IllegalDecisionError) as ea:
            ref.step(bad)
        with pytest.raises(IllegalDecisionError) as eb:
            fast.step(bad)
        assert str(ea.value) == str(eb.value)
    assert ref.n_steps == fast.n_steps == 0


# ----------------------------------------------------------------------------------------------------------
# Copies
# ----------------------------------------------------------------------------------------------------------


def _stepped(make_pair, kwargs: dict, seed: int, steps: int) -> tuple[PreemptionEnv, PreemptionEnv, dict]:
    ref, fast = make_pair(kwargs)
    a = ref.reset(seed=seed)
    b = fast.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for i in range(steps):
        action = pick(rng, a[-1]["action_mask"], 0.2)
        a, b = ref.step(action), fast.step(action)
        assert_same_step(ref, fast, a, b, f"step {i + 1}")
        assert not a[2], "the episode ended too early"
    return ref, fast, a[-1]


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_made_mid_episode_continue_identically(make_pair, how):
    ref, fast, info = _stepped(make_pair, {"n_jobs": 1000, "max_plans": 6}, seed=3, steps=8)
    twin = pickle.loads(pickle.dumps(fast)) if how == "pickle" else copy.deepcopy(fast)
    assert isinstance(twin.backend, NativePlanBackend) and twin.sim is not fast.sim
    assert twin.backend.core is twin.sim.core is not fast.backend.core
    same_bits(twin.backend.observe(), fast.backend.observe(), "copy")
    assert np.array_equal(twin.action_masks(), fast.action_masks())
    assert [(o.plan, o.sources) for o in twin.plan_options] == [(o.plan, o.sources) for o in fast.plan_options]
    rng = np.random.default_rng(11)
    terminated = False
    while not terminated:
        action = pick(rng, info["action_mask"], 0.2)
        a, b, c = ref.step(action), fast.step(action), twin.step(action)
        assert_same_step(ref, fast, a, b, "original")
        assert_same_step(ref, twin, a, c, "copy")
        info, terminated = a[-1], a[2]
    assert_same_results(ref.sim, twin.sim)


def test_a_clone_of_the_simulator_decides_alike(make_pair):
    """Simulator.clone() mid-episode: a decision core of its own on the same pending request; driving either
    leaves the other as it was, and both reach the same end under the same choices."""
    _, fast, _ = _stepped(make_pair, {"n_jobs": 1000}, seed=5, steps=5)
    sim = fast.sim
    assert isinstance(sim, PlanNativeSimulator)
    twin = sim.clone()
    assert isinstance(twin, PlanNativeSimulator) and twin.core is not sim.core
    assert twin.core.options() == sim.core.options() and twin.core.job == sim.core.job
    obs = [np.empty(sim.core.observation_size, dtype=np.float32) for _ in range(2)]
    sim.core.observe(obs[0])
    twin.core.observe(obs[1])
    same_bits(obs[0], obs[1], "clone")
    # the clone goes first, to the end, taking the last option every time; the original is untouched meanwhile
    before = sim.core.options()
    choices = []
    while True:
        choices.append(twin.core.n_options - 1)
        twin.choose(choices[-1])
        if not twin.next_decision():
            break
    assert sim.core.options() == before and not sim.done
    for action in choices:
        assert sim.core.n_options - 1 == action
        sim.choose(action)
        sim.next_decision()
    assert sim.done and twin.done
    assert_same_results(twin, sim)
    # and a pickled clone replays the same log
    again = pickle.loads(pickle.dumps(twin))
    assert again.done and np.array_equal(again.result().completion, twin.result().completion)


def test_the_simulator_pickles_alone_mid_episode(make_pair):
    _, fast, _ = _stepped(make_pair, {"n_jobs": 1000}, seed=6, steps=4)
    sim = fast.sim
    twin = pickle.loads(pickle.dumps(sim))
    assert twin.core.options() == sim.core.options()
    assert twin.pending_request is not None and twin.pending_request.job.job_id == sim.pending_request.job.job_id
    for s in (sim, twin):  # waiting from here on ends the same way
        s.choose(0)
        while s.next_decision():
            s.choose(0)
    assert np.array_equal(sim.result().completion, twin.result().completion)


# ----------------------------------------------------------------------------------------------------------
# The bound class, the layout, the choice of backend
# ----------------------------------------------------------------------------------------------------------


def test_the_bound_core_checks_its_inputs():
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    env = PreemptionEnv(EnvConfig(n_jobs=1000, max_plans=4, sim={"engine": "native"}, **PLAN))
    env.reset(seed=1)
    backend = env.backend
    assert isinstance(backend, NativePlanBackend)
    eng = env.sim._engine
    est = backend.encoder.estimate
    three = np.ones(3)
    cols = backend.encoder.observer.scales.columns()
    rules = [("fitgpp", {}), ("k8s", {})]

    def build(**kw):
        args = dict(
            engine=eng, rules=rules, max_plans=4, queue_rows=4, estimate=est, scale=three, total=three,
            te_submit=cols[0], te_median=cols[1], be_submit=cols[2], be_median=cols[3], max_subset=12,
            compensated_sum=False,
        )  # fmt: skip
        args.update(kw)
        return _engine.PlanCore(**args)

    build()
    with pytest.raises(ValueError, match="max_plans"):
        build(max_plans=1)
    with pytest.raises(ValueError, match="queue_rows"):
        build(queue_rows=-1)
    with pytest.raises(ValueError, match="estimate"):
        build(estimate=est[:-1])
    with pytest.raises(ValueError, match="shape"):
        build(scale=np.ones(2))
    with pytest.raises(ValueError, match="running medians"):
        build(te_median=cols[1][:-1])
    with pytest.raises(ValueError, match="ascending"):
        build(be_submit=cols[2][::-1].copy())
    with pytest.raises(ValueError, match="rule"):
        build(rules=[("nonesuch", {})])
    with pytest.raises(TypeError):
        build(engine=object())
    core = backend.core
    with pytest.raises(ValueError, match="illegal"):
        core.choose(core.n_options)
    with pytest.raises(ValueError, match="illegal"):
        core.choose(-1)
    with pytest.raises(ValueError, match="shape"):
        core.observe(np.empty(core.observation_size + 1, dtype=np.float32))
    with pytest.raises(TypeError):
        core.observe(np.empty(core.observation_size, dtype=np.float64))
    with pytest.raises(ValueError, match="shape"):
        core.mask(np.empty(3, dtype=bool))
    with pytest.raises(RuntimeError):  # the engine has a decision pending
        core.next_decision()
    with pytest.raises(IllegalDecisionError, match="pending"):
        env.sim.advance()
    while env.pending_request is not None:
        env.step(0)
    with pytest.raises(ValueError, match="no decision"):
        core.choose(0)
    obs = np.full(core.observation_size, 7.0, dtype=np.float32)
    core.observe(obs)
    assert not obs.any()


def test_the_core_computes_the_declared_layout():
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    lay = features.schema(2, "plan")
    head, queue, row = _engine.plan_feature_names(list(features.PLAN_RULES))
    assert tuple(head) == tuple(f.name for f in lay.head)
    assert tuple(queue) == tuple(f.name for f in lay.queue)
    assert tuple(row) == tuple(f.name for f in lay.row)


def test_a_plan_feature_declared_but_not_built_is_refused(monkeypatch):
    extra = features.Feature("victims_squared", "the number of victims, squared")
    monkeypatch.setattr(features, "PLAN_FEATURES", (*features.PLAN_FEATURES, extra))
    with pytest.raises(KeyError, match="victims_squared"):  # the Python protocol: declared, not computed
        env = PreemptionEnv(n_jobs=300, sim={"engine": "native"}, **PLAN)
        env._protocol = "python"
        env.reset(seed=0)
    with pytest.raises(ValueError, match="schedgym.decision.features"):  # the native core: not built
        PreemptionEnv(n_jobs=300, sim={"engine": "native"}, **PLAN).reset(seed=0)


def test_which_backend_runs_the_plan_mode(monkeypatch):
    env = PreemptionEnv(n_jobs=300, sim={"engine": "native"}, **PLAN)
    env.reset(seed=0)
    assert isinstance(env.backend, NativePlanBackend)
    env._protocol = "python"
    env.reset(seed=0)
    assert isinstance(env.backend, PythonBackend) and not isinstance(env.sim, PlanNativeSimulator)
    env = PreemptionEnv(n_jobs=300, sim={"engine": "python"}, **PLAN)
    env.reset(seed=0)
    assert isinstance(env.backend, PythonBackend)
    # a plan rule without a native counterpart: the Python protocol on the native engine
    from baselines.k8s import K8s

    class OwnK8s(K8s):
        pass

    from schedgym.decision import plan_mode

    real = plan_mode.plan_rules

    def own_rules():
        rules = real()
        own = OwnK8s()
        own.reset(np.random.default_rng(0))
        return [(n, own if n == "k8s" else r) for n, r in rules]

    monkeypatch.setattr(plan_mode, "plan_rules", own_rules)
    env = PreemptionEnv(n_jobs=300, sim={"engine": "native"}, **PLAN)
    env.reset(seed=0)
    assert isinstance(env.backend, PythonBackend) and env.sim.engine == "native"
