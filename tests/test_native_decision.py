"""The environment's native path: the decision protocol in C++ (``EnvCore``, ``schedgym/sim/native/decision.cpp``)
against the specification, ``schedgym/decision/stepwise.py`` on the Python engine.

Differential: a Python-engine environment and a native-engine environment (which decides in C++) are stepped
with the same random legal actions, and every observation (bit for bit), mask, reward, info, candidate row and
chosen victim, every lazily built request, the episode ends and the final per-job results must be identical.
Configurations cover busy default episodes, small hot workloads on hypothesis-drawn rules (caps, queues,
backfill, placement, restart overhead, estimate noise, reward), gang TE jobs and fractional demands, and
``max_candidates`` from 1 to 64. Copies made mid-attempt must continue identically; the bound class checks
its inputs.

The reference is the Python engine in the module's native run, and the native engine with the Python protocol
(``PreemptionEnv._protocol = "python"``) in its python run, which isolates the protocol from the engine.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedgym.decision.backend import NativeBackend, PythonBackend
from schedgym.decision.features import CANDIDATE_FEATURES, N_HEAD
from schedgym.envs import PreemptionEnv
from schedgym.errors import IllegalDecisionError
from schedgym.sim import Job, JobClass, JobSpec
from schedgym.sim.native_engine import StepwiseNativeSimulator
from schedgym.sim.simulator import native_available
from schedgym.workloads import Workload, generate, preset

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


@pytest.fixture(scope="module")
def make_pair(engine: str) -> Callable[[dict], tuple[PreemptionEnv, PreemptionEnv]]:
    """``make_pair(env kwargs) -> (reference, native)``: the same environment twice, the second deciding in C++."""
    if not native_available():
        pytest.skip("the native engine is not built")

    def _make(kwargs: dict) -> tuple[PreemptionEnv, PreemptionEnv]:
        kwargs = dict(kwargs)
        sim = dict(kwargs.pop("sim", {}))
        if engine == "native":
            ref = PreemptionEnv(sim={**sim, "engine": "python"}, **kwargs)
        else:
            ref = PreemptionEnv(sim={**sim, "engine": "native"}, **kwargs)
            ref._protocol = "python"  # the native engine, decisions by schedgym.decision.stepwise
        return ref, PreemptionEnv(sim={**sim, "engine": "native"}, **kwargs)

    return _make


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d: Path = tmp_path_factory.mktemp("clusters")
    texts = {
        "two": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\n",
        # heterogeneous in every resource, so that CPUs and memory bind too (16-GPU gangs fit on n0 and n2)
        "mixed": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,4,32,256\nn2,8,64,512\nn3,6,48,384\n",
        "four": "name,gpus,cpus,mem_gb\nn0,8,64,512\nn1,8,64,512\nn2,8,64,512\nn3,8,64,512\n",
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


def assert_same_step(ref: PreemptionEnv, fast: PreemptionEnv, a: tuple, b: tuple, where: str) -> None:
    """``a`` and ``b``: (obs, info) after reset, or (obs, reward, terminated, truncated, info) after a step."""
    obs_a, info_a = a[0], a[-1]
    obs_b, info_b = b[0], b[-1]
    assert obs_b.dtype == np.float32 and obs_b.shape == obs_a.shape
    diff = np.flatnonzero(obs_a.view(np.uint32) != obs_b.view(np.uint32))
    assert diff.size == 0, f"{where}: observations differ at {diff.tolist()}: {obs_a[diff]} vs {obs_b[diff]}"
    assert a[1:-1] == b[1:-1], where  # reward, terminated, truncated
    assert np.array_equal(info_a["action_mask"], info_b["action_mask"]), where
    assert info_b["action_mask"].dtype == bool
    for key in INFO_KEYS:
        assert info_a[key] == info_b[key], (where, key, info_a[key], info_b[key])
    assert np.array_equal(ref.action_masks(), fast.action_masks()), where
    rows_a = [(j.job_id, n) for j, n in ref.candidate_rows]
    assert rows_a == [(j.job_id, n) for j, n in fast.candidate_rows], where
    assert [v.job_id for v in ref.chosen_victims] == [v.job_id for v in fast.chosen_victims], where
    assert ref.n_decisions == fast.n_decisions and ref.n_steps == fast.n_steps, where


def assert_same_request(ref: PreemptionEnv, fast: PreemptionEnv) -> None:
    ra, rb = ref.pending_request, fast.pending_request
    assert (ra is None) == (rb is None)
    if ra is None or rb is None:
        return
    assert ra.job.job_id == rb.job.job_id and ra.now == rb.now and ra.queued == rb.queued
    assert np.array_equal(ra.avail, rb.avail) and np.array_equal(ra.held, rb.held)
    assert {n: [c.job_id for c in cs] for n, cs in ra.candidates.items()} == {
        n: [c.job_id for c in cs] for n, cs in rb.candidates.items()
    }
    assert (ra.n_jobs, ra.max_preemptions) == (rb.n_jobs, rb.max_preemptions)
    for n, cs in rb.candidates.items():  # the records are the simulator's, up to date
        for c, d in zip(ra.candidates[n], cs, strict=True):
            assert _runtime(c) == _runtime(d)
    # the rows' jobs are the request's records
    assert all(job in rb.candidates[node] for job, node in fast.candidate_rows)


def _runtime(job: Job) -> tuple:
    return job.state, job.nodes, job.preemptions, job.remaining, job.run_start, job.run_overhead


def assert_same_results(ref: PreemptionEnv, fast: PreemptionEnv) -> None:
    a, b = ref.sim.result(), fast.sim.result()
    for field in ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert a.n_preemptions == b.n_preemptions
    seg = [(s.job, s.node, s.start, s.end, s.end_reason) for s in a.segments]
    assert seg == [(s.job, s.node, s.start, s.end, s.end_reason) for s in b.segments]
    assert ref.sim.accrued == fast.sim.accrued and ref.sim.accrued_bounded == fast.sim.accrued_bounded


def lockstep(
    ref: PreemptionEnv,
    fast: PreemptionEnv,
    *,
    seed: int,
    action_seed: int,
    options: dict | None = None,
    p_wait: float = 0.2,
    check_requests: int = 3,
    max_steps: int | None = None,
) -> int:
    """Reset both with ``seed`` and step them with the same random legal actions to the end (or ``max_steps``);
    returns the number of steps."""
    a = ref.reset(seed=seed, options=options)
    b = fast.reset(seed=seed, options=options)
    assert isinstance(fast.backend, NativeBackend), "the native path is not active"
    assert isinstance(ref.backend, PythonBackend) and not isinstance(ref.sim, StepwiseNativeSimulator)
    assert_same_step(ref, fast, a, b, "reset")
    assert_same_request(ref, fast)
    rng = np.random.default_rng(action_seed)
    info = a[-1]
    steps, terminated = 0, False
    while not terminated and (max_steps is None or steps < max_steps):
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal)) if len(legal) == 1 or rng.random() < p_wait else int(rng.choice(legal[1:]))
        a = ref.step(action)
        b = fast.step(action)
        steps += 1
        assert_same_step(ref, fast, a, b, f"step {steps} (action {action})")
        if steps <= check_requests or rng.random() < 0.05:
            assert_same_request(ref, fast)
        info, terminated = a[-1], a[2]
    if terminated:
        assert fast.pending_request is None and fast.decision is None and not b[0].any()
        assert_same_results(ref, fast)
    return steps


# ----------------------------------------------------------------------------------------------------------
# Configurations
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "seed"),
    [
        ({"n_jobs": 1000}, 1),  # tests/test_env.py's BUSY episode
        ({"n_jobs": 1000}, 7),
        ({"n_jobs": 1000, "max_candidates": 1}, 2),
        ({"n_jobs": 1000, "max_candidates": 64, "estimate_noise": 0.0}, 3),
        ({"n_jobs": 1000, "sim": {"max_preemptions": 3, "restart_overhead": 30.0}}, 4),
        ({"n_jobs": 1000, "sim": {"queue": "fifo", "backfill": False}}, 5),
        ({"n_jobs": 1000, "sim": {"queue": "fifo", "placement": "first-fit"}, "estimate_noise": 1.5}, 6),
        ({"n_jobs": 600, "cluster": "small", "reward": "bounded_slowdown", "preemption_cost": 0.5}, 8),
    ],
)
def test_busy_episodes_are_identical(make_pair, kwargs, seed):
    ref, fast = make_pair(kwargs)
    for p_wait in (0.2, 0.6):
        assert lockstep(ref, fast, seed=seed, action_seed=seed, p_wait=p_wait) > 3


@st.composite
def setups(draw):
    """(env kwargs, hot workload parameters, gang-heavy, reset seed, action seed, p_wait)."""
    kwargs = dict(
        cluster=draw(st.sampled_from(["small", "two", "mixed", "four"])),
        n_jobs=draw(st.integers(30, 150)),
        max_candidates=draw(st.sampled_from([1, 2, 3, 5, 8, 16, 40])),
        sim=dict(
            max_preemptions=draw(st.sampled_from([1, 2, 3, 0, 1, 2, 5])),
            restart_overhead=draw(st.sampled_from([0.0, 5.0, 60.0])),
            queue=draw(st.sampled_from(["fifo", "priority"])),
            backfill=draw(st.booleans()),
            placement=draw(st.sampled_from(["best-fit", "first-fit"])),
        ),
        estimate_noise=draw(st.sampled_from([0.0, 0.3, 1.5])),
        reward=draw(st.sampled_from(["slowdown", "bounded_slowdown"])),
        te_weight=draw(st.sampled_from([1.0, 2.0])),
        be_weight=draw(st.sampled_from([1.0, 0.5])),
        preemption_cost=draw(st.sampled_from([0.0, 0.5])),
    )
    hot = dict(
        load=draw(st.sampled_from([2.0, 3.0, 6.0])),
        te_fraction=draw(st.sampled_from([0.3, 0.5, 0.7])),
        be_duration_median=draw(st.sampled_from([900.0, 3600.0])),
        be_duration_min=draw(st.sampled_from([600.0, 5.0])),
        grace_min=draw(st.sampled_from([5.0, 0.0])),
    )
    gangs = draw(st.booleans()) and kwargs["cluster"] != "two"  # gangs over up to 4 nodes
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


def fractional_gang_workload(rng: np.random.Generator, n: int, n_nodes: int) -> Workload:
    """Jobs with fractional demands in all three resources and gangs of both classes, arriving fast."""
    jobs = []
    t = 0.0
    for i in range(n):
        t += float(rng.exponential(20.0))
        k = int(rng.choice([1, 1, 1, 2, 3])) if n_nodes >= 3 else 1
        per_node = (
            float(rng.choice([0.5, 1.0, 1.5, 2.0, 2.5, 4.0])),
            float(rng.uniform(1, 16)),
            float(rng.uniform(4, 96)),
        )
        te = rng.random() < 0.4
        jobs.append(
            JobSpec(
                f"x{i}",
                round(t, 3),
                float(rng.integers(30, 4000)),
                per_node[0] * k,
                per_node[1] * k,
                per_node[2] * k,
                gang_size=k,
                job_class=JobClass.TE if te else JobClass.BE,
                grace_period=float(rng.integers(0, 90)),
            )
        )
    return Workload(tuple(jobs), name="fractional-gangs")


@pytest.mark.parametrize("max_candidates", [1, 4, 32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gangs_and_fractional_demands_are_identical(make_pair, cluster_files, seed, max_candidates):
    kwargs = {"cluster": cluster_files["mixed"], "max_candidates": max_candidates, "sim": {"max_preemptions": 2}}
    ref, fast = make_pair(kwargs)
    wl = fractional_gang_workload(np.random.default_rng(seed), 250, 4)
    steps = 0
    for p_wait in (0.0, 0.3):
        steps += lockstep(ref, fast, seed=seed, action_seed=seed + 10, options={"workload": wl}, p_wait=p_wait)
    assert steps > 10
    assert fast.sim.n_preemptions > 0


# ----------------------------------------------------------------------------------------------------------
# Copies, the decision view, errors
# ----------------------------------------------------------------------------------------------------------


def _mid_attempt(make_pair, kwargs: dict, seed: int) -> tuple[PreemptionEnv, PreemptionEnv, np.random.Generator]:
    """Both environments stepped (identically) into an attempt in progress: victims chosen, more needed."""
    ref, fast = make_pair(kwargs)
    a = ref.reset(seed=seed)
    fast.reset(seed=seed)
    rng = np.random.default_rng(seed)
    info = a[-1]
    for _ in range(5000):
        if fast.chosen_victims:
            return ref, fast, rng
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal[1:])) if len(legal) > 1 else 0
        a = ref.step(action)
        b = fast.step(action)
        assert_same_step(ref, fast, a, b, "to the attempt")
        info = a[-1]
        assert not a[2], "the episode ended before an attempt needed a second victim"
    raise AssertionError("no attempt in progress")


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copies_made_mid_attempt_continue_identically(make_pair, cluster_files, how):
    kwargs = {"n_jobs": 1000, "cluster": cluster_files["mixed"], "max_candidates": 8}
    ref, fast, rng = _mid_attempt(make_pair, kwargs, seed=3)
    assert fast.chosen_victims and fast.decision is not None and fast.decision.targets
    twin = pickle.loads(pickle.dumps(fast)) if how == "pickle" else copy.deepcopy(fast)
    assert isinstance(twin.backend, NativeBackend) and twin.sim is not fast.sim
    assert [v.job_id for v in twin.chosen_victims] == [v.job_id for v in fast.chosen_victims]
    assert twin.decision is not None and twin.decision.targets == fast.decision.targets
    obs = fast.backend.observe()
    assert np.array_equal(twin.backend.observe().view(np.uint32), obs.view(np.uint32))
    assert np.array_equal(twin.action_masks(), fast.action_masks())
    assert_same_request(fast, twin)
    # all three go on in lock step to the end
    info = {"action_mask": ref.action_masks()}
    terminated = False
    while not terminated:
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.choice(legal)) if len(legal) == 1 or rng.random() < 0.2 else int(rng.choice(legal[1:]))
        a, b, c = ref.step(action), fast.step(action), twin.step(action)
        assert_same_step(ref, fast, a, b, "original")
        assert_same_step(ref, twin, a, c, "copy")
        info, terminated = a[-1], a[2]
    assert_same_results(ref, twin)


def test_the_simulator_pickles_alone_mid_attempt(make_pair, cluster_files):
    ref, fast, _ = _mid_attempt(make_pair, {"n_jobs": 1000, "cluster": cluster_files["four"]}, seed=5)
    sim = fast.sim
    twin = pickle.loads(pickle.dumps(sim))
    assert twin.core.chosen() == sim.core.chosen() and twin.core.rows() == sim.core.rows()
    assert twin.pending_request is not None and twin.pending_request.job.job_id == sim.pending_request.job.job_id
    # abandoning the attempt on both, then declining everything, ends the same way
    for s in (sim, twin):
        assert s.choose(0) == 0
        while s.next_decision():
            s.choose(0)
    assert np.array_equal(sim.result().completion, twin.result().completion)


def test_the_decision_view_and_illegal_actions_match_the_python_protocol(make_pair):
    ref, fast = make_pair({"n_jobs": 1000, "max_candidates": 4})
    ref.reset(seed=1)
    fast.reset(seed=1)
    da, db = ref.decision, fast.decision
    assert da is not None and db is not None
    assert db.offers_choice and db.request is fast.pending_request
    assert [(j.job_id, n) for j, n in da.rows] == [(j.job_id, n) for j, n in db.rows]
    assert np.array_equal(da.mask(), db.mask())
    assert np.array_equal(da.observe().view(np.uint32), db.observe().view(np.uint32))
    n = len(fast.candidate_rows)
    for bad in (n + 1, -1, 1.5, "1", None, [1], True, float("inf"), float("nan")):
        with pytest.raises(IllegalDecisionError) as ea:
            ref.step(bad)
        with pytest.raises(IllegalDecisionError) as eb:
            fast.step(bad)
        assert str(ea.value) == str(eb.value)
    for ok in (np.int64(1), 1.0, np.int32(0)):
        assert da.check(ok) == db.check(ok)
    assert ref.n_steps == fast.n_steps == 0  # illegal actions are not steps


def test_the_bound_core_checks_its_inputs(make_pair):
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    env = PreemptionEnv(n_jobs=1000, max_candidates=4, sim={"engine": "native"})
    env.reset(seed=1)
    sim = env.sim
    eng, est = sim._engine, env.backend.encoder.estimate
    three = np.ones(3)
    heads, rows = (np.ones(n) for n in (N_HEAD, len(CANDIDATE_FEATURES)))
    with pytest.raises(ValueError, match="max_candidates"):
        _engine.EnvCore(eng, 0, est, three, three, heads, rows)
    with pytest.raises(ValueError, match="estimate"):
        _engine.EnvCore(eng, 4, est[:-1], three, three, heads, rows)
    with pytest.raises(ValueError, match="shape"):
        _engine.EnvCore(eng, 4, est, np.ones(2), three, heads, rows)
    with pytest.raises(ValueError, match="schedgym.decision.features"):  # a feature declared but not built
        _engine.EnvCore(eng, 4, est, three, three, np.ones(N_HEAD + 1), rows)
    with pytest.raises(ValueError, match="schedgym.decision.features"):
        _engine.EnvCore(eng, 4, est, three, three, heads, rows[:-1])
    with pytest.raises(TypeError):
        _engine.EnvCore(object(), 4, est, three, three, heads, rows)
    core = env.backend.core
    with pytest.raises(ValueError, match="illegal"):
        core.choose(core.n_rows + 1)
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
    with pytest.raises(ValueError, match="candidate"):
        core.restore([10**6], [0])
    # driving the engine behind the core's back is refused, not followed blindly
    with pytest.raises(IllegalDecisionError, match="pending"):
        sim.advance()
    # after which the environment still works
    assert env.step(0)[1] <= 0.0
    while env.pending_request is not None:
        env.step(0)
    with pytest.raises(ValueError, match="no decision"):
        core.choose(0)
    obs = np.full(core.observation_size, 7.0, dtype=np.float32)
    core.observe(obs)
    assert not obs.any()


# ----------------------------------------------------------------------------------------------------------
# The features' scales: declared once (schedgym.decision.features), read by both engines


def test_the_native_core_applies_each_declared_scale_where_the_declaration_puts_it():
    """The C++ core names the positions it normalises with a declared scale (``FEATURE_INDEX``); they must be
    exactly the features that declare one, at their places in the layout."""
    from schedgym.decision import features
    from schedgym.sim import _engine  # type: ignore[attr-defined]

    head = (*features.JOB_FEATURES, *features.CLUSTER_FEATURES)
    declared = {
        "head": {f.name: i for i, f in enumerate(head) if f.scale is not None},
        "row": {f.name: i for i, f in enumerate(features.CANDIDATE_FEATURES) if f.scale is not None},
    }
    assert {k: dict(v) for k, v in _engine.FEATURE_INDEX.items()} == declared


def test_a_scale_changed_in_the_declaration_changes_both_engines_alike(make_pair, monkeypatch):
    """Changing a scale in the one declaration is all it takes: both protocols follow it, bit for bit."""
    from schedgym.decision import features

    kwargs = {"n_jobs": 400, "max_candidates": 6}
    before, _ = make_pair(kwargs)
    obs_before = before.reset(seed=2)[0]

    def times7(group: tuple[features.Feature, ...]) -> tuple[features.Feature, ...]:
        return tuple(replace(f, scale=f.scale * 7) if f.scale is not None else f for f in group)

    for group in ("JOB_FEATURES", "CLUSTER_FEATURES", "CANDIDATE_FEATURES"):
        monkeypatch.setattr(features, group, times7(getattr(features, group)))
    ref, fast = make_pair(kwargs)
    obs_after = ref.reset(seed=2)[0]
    duration = [f.name for f in features.JOB_FEATURES].index("duration_estimate")
    assert obs_after[duration] < obs_before[duration], "the changed scale did not reach the Python protocol"
    assert lockstep(ref, fast, seed=2, action_seed=5) > 0
