"""The native ``random`` rule against the Python one: numpy's generator draw for draw, and whole runs.

``baselines/random_policy.py`` draws from a numpy Generator (PCG64). The native rule reproduces those draws
(``schedgym/sim/native/pcg64.hpp``): it starts from the Generator's state and writes back the state the Python
rule would have left. These tests hold

- the native generator to numpy itself (``_rules.pcg64_draws``): permutations of every size up to 1,000,
  ``random()``, the buffered 32-bit draws, interleaved, from many seeds and from states with and without a
  pending 32-bit half;
- ``native_rule()`` to the cases where the native rule may stand in (the exact class, an exact PCG64
  Generator);
- whole native runs to Python runs, job by job, and the Generator's state after them;
- pickled and copied native runs to the run they copy (a replay starts from the Generator's state at the start
  of the run, and leaves the live Generator alone).

(``tests/test_native_rules.py`` compares the two rules plan by plan.)
"""

from __future__ import annotations

import copy
import os
import pickle

import numpy as np
import pytest
from helpers import small_workloads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baselines.random_policy import RandomPreemption
from schedgym.sim import ClusterSpec, SimConfig, Simulator, cluster_preset
from schedgym.workloads import generate, preset

try:
    from schedgym.sim import _engine, _rules  # noqa: F401
except ImportError:  # pragma: no cover - depends on the build
    if os.environ.get("CI"):
        raise
    pytest.skip("the native engine (schedgym.sim._engine, _rules) is not built", allow_module_level=True)

SCALE = float(os.environ.get("SCHEDGYM_PROPERTY_SCALE", "1"))
RESULT_FIELDS = ("first_start", "completion", "preemptions", "grace_time", "overhead_time", "run_time")


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


@pytest.fixture(scope="module", autouse=True)
def engine() -> str:
    """Overrides conftest's per-engine parametrisation: these tests name both engines explicitly."""
    return "both"


def rng_at(seed: int, pending: bool) -> np.random.Generator:
    """``default_rng(seed)``, after one 32-bit draw if ``pending`` (its high half then waits in the state)."""
    rng = np.random.default_rng(seed)
    if pending:
        rng.integers(0, 2**32, dtype=np.uint32)
        assert rng.bit_generator.state["has_uint32"] == 1
    return rng


def numpy_draws(rng: np.random.Generator, draws: list[tuple]) -> list:
    """What numpy's own Generator gives for the draws of ``_rules.pcg64_draws``."""
    out: list = []
    for draw in draws:
        if draw[0] == "permutation":
            out.append(tuple(rng.permutation(draw[1]).tolist()))
        elif draw[0] == "random":
            out.append(rng.random())
        elif draw[0] == "uint32":
            out.append(int(rng.integers(0, 2**32, dtype=np.uint32)))  # numpy's next_uint32, nothing else
        elif draw[0] == "uint64":
            out.append(int(rng.bit_generator.random_raw()))
        else:
            raise AssertionError(draw)
    return out


def assert_same_draws(rng: np.random.Generator, draws: list[tuple]) -> None:
    twin = copy.deepcopy(rng)
    got = _rules.pcg64_draws(twin, draws)
    want = numpy_draws(rng, draws)
    assert got == want
    assert twin.bit_generator.state == rng.bit_generator.state


# ----------------------------------------------------------------------------------------------------------
# The generator, draw for draw
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 2**63 + 5])
def test_permutations_of_every_size_up_to_1000(seed, pending):
    assert_same_draws(rng_at(seed, pending), [("permutation", n) for n in range(1001)])


@pytest.mark.parametrize("pending", [False, True])
def test_small_permutations_and_scores_interleaved_on_many_seeds(pending):
    # The rule's own pattern: a permutation of a few candidates, then a score, node after node.
    draws = [d for n in (3, 1, 0, 2, 5, 1, 8, 2, 17, 4) for d in (("permutation", n), ("random",))]
    for seed in range(300):
        assert_same_draws(rng_at(seed, pending), draws)


DRAWS = st.one_of(
    st.tuples(st.just("permutation"), st.integers(0, 40)),
    st.tuples(st.just("permutation"), st.integers(41, 3000)),
    st.tuples(st.just("random")),
    st.tuples(st.just("uint32")),
    st.tuples(st.just("uint64")),
)


@settings(max_examples=examples(300), deadline=None)
@given(seed=st.integers(0, 2**128 - 1), pending=st.booleans(), draws=st.lists(DRAWS, max_size=40))
def test_interleaved_draws(seed, pending, draws):
    assert_same_draws(rng_at(seed, pending), draws)


@pytest.mark.parametrize(
    ("state", "inc", "has_uint32", "uinteger"),
    [
        (0, 1, 0, 0),
        (2**128 - 1, 2**128 - 1, 1, 2**32 - 1),
        (2**64 - 1, 2**64 + 1, 1, 0),
        (2**127, 12345678901234567890123456789, 0, 77),
        (3, 2, 1, 5),  # an even increment: numpy takes it as given, and so does the native generator
    ],
)
def test_states_set_by_hand(state, inc, has_uint32, uinteger):
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": has_uint32,
        "uinteger": uinteger,
    }
    assert_same_draws(rng, [("uint32",), ("permutation", 10), ("random",), ("uint64",), ("permutation", 257)])


def random_interval(rng: np.random.Generator, max_: int) -> int:
    """numpy's random_interval (distributions.c) over numpy's raw draws, for bounds above 32 bits, which no
    Generator method of numpy reaches with a feasible array size."""
    mask = max_
    for shift in (1, 2, 4, 8, 16, 32):
        mask |= mask >> shift
    while True:
        value = int(rng.bit_generator.random_raw()) & mask
        if value <= max_:
            return value


@pytest.mark.parametrize("pending", [False, True])
@pytest.mark.parametrize("max_", [2**32, 2**32 + 1, 3 * 2**32 + 7, 2**40 + 12345, 2**63, 2**63 + 1, 2**64 - 1])
def test_intervals_above_32_bits_draw_64_bits(max_, pending):
    rng = rng_at(5, pending)
    twin = copy.deepcopy(rng)
    got = _rules.pcg64_draws(twin, [("interval", max_)] * 50)
    assert got == [random_interval(rng, max_) for _ in range(50)]
    assert twin.bit_generator.state == rng.bit_generator.state  # the pending 32-bit half is left alone


@pytest.mark.parametrize("max_", [1, 2, 5, 2**31, 2**32 - 1])
def test_intervals_up_to_32_bits_draw_32_bits(max_):
    # Shuffles use these: compare with numpy's own shuffle of max_ + 1 elements, where that is small enough.
    rng = rng_at(3, True)
    twin = copy.deepcopy(rng)
    got = _rules.pcg64_draws(twin, [("interval", max_)] * 20)
    mask = (1 << max_.bit_length()) - 1
    want = []
    for _ in range(20):
        while (value := int(rng.integers(0, 2**32, dtype=np.uint32)) & mask) > max_:
            pass
        want.append(value)
    assert got == want
    assert twin.bit_generator.state == rng.bit_generator.state


class OwnGenerator(np.random.Generator):
    pass


class OwnPCG64(np.random.PCG64):
    pass


OTHER_GENERATORS = [
    OwnGenerator(np.random.PCG64(0)),
    np.random.Generator(OwnPCG64(0)),
    np.random.Generator(np.random.PCG64DXSM(0)),
    np.random.Generator(np.random.MT19937(0)),
    np.random.Generator(np.random.SFC64(0)),
]


@pytest.mark.parametrize("rng", OTHER_GENERATORS, ids=lambda r: f"{type(r).__name__}-{type(r.bit_generator).__name__}")
def test_only_an_exact_pcg64_generator_is_drawn_from(rng):
    before = pickle.dumps(rng.bit_generator.state)  # (MT19937's state holds an array)
    with pytest.raises(ValueError, match="Generator|PCG64"):
        _rules.pcg64_draws(rng, [("random",)])
    assert pickle.dumps(rng.bit_generator.state) == before


# ----------------------------------------------------------------------------------------------------------
# When the native rule stands in
# ----------------------------------------------------------------------------------------------------------


class OwnRandom(RandomPreemption):
    pass


def test_native_rule_hands_over_the_policys_own_generator():
    policy = RandomPreemption()
    policy.reset(np.random.default_rng(3))
    name, params = policy.native_rule()
    assert name == "random" and dict(params) == {"rng": policy.rng}
    assert params["rng"] is policy.rng  # the very Generator, so that the run advances it


@pytest.mark.parametrize("rng", OTHER_GENERATORS, ids=lambda r: f"{type(r).__name__}-{type(r.bit_generator).__name__}")
def test_native_rule_is_none_for_other_generators(rng):
    policy = RandomPreemption()
    policy.reset(rng)
    assert policy.native_rule() is None


def test_native_rule_is_none_for_a_subclass():
    policy = OwnRandom()
    policy.reset(np.random.default_rng(0))
    assert policy.native_rule() is None


# ----------------------------------------------------------------------------------------------------------
# Whole runs
# ----------------------------------------------------------------------------------------------------------


def run(engine: str, cl: ClusterSpec, jobs, config: dict, rng: np.random.Generator, policy_class=RandomPreemption):
    policy = policy_class()
    policy.reset(rng)
    sim = Simulator(cl, jobs, SimConfig(engine=engine, **config))
    assert sim.engine == engine
    return sim, sim.run(policy)


def assert_same_results(a, b) -> None:  # noqa: ANN001
    for field in RESULT_FIELDS:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.segments == b.segments and a.n_preemptions == b.n_preemptions


@pytest.fixture
def python_calls(monkeypatch):
    """How many nodes the Python random rule evaluated (the native engine must evaluate none)."""
    calls = {"n": 0}
    original = RandomPreemption._evaluate_node

    def counting(self, *args):  # noqa: ANN001
        calls["n"] += 1
        return original(self, *args)

    monkeypatch.setattr(RandomPreemption, "_evaluate_node", counting)
    return calls


def assert_same_runs(cl: ClusterSpec, jobs, config: dict, rng: np.random.Generator, calls: dict) -> int:
    """Run ``random`` on both engines from twins of ``rng``; return the preemptions."""
    py_rng, nat_rng = copy.deepcopy(rng), copy.deepcopy(rng)
    _, want = run("python", cl, jobs, config, py_rng)
    evaluated = calls["n"]
    _, got = run("native", cl, jobs, config, nat_rng)
    assert calls["n"] == evaluated, "the native engine asked the Python rule"
    assert_same_results(want, got)
    assert nat_rng.bit_generator.state == py_rng.bit_generator.state
    assert (evaluated > 0) == (py_rng.bit_generator.state != rng.bit_generator.state)  # it drew iff it evaluated
    return int(want.n_preemptions)


@pytest.mark.parametrize(
    ("seed", "config"),
    [
        (0, {}),
        (1, {"max_preemptions": 3, "restart_overhead": 60.0, "placement": "first-fit"}),
        (2, {"queue": "fifo", "max_preemptions": 2, "restart_overhead": 5.0, "backfill": False}),
    ],
)
def test_paper_workloads(seed, config, python_calls):
    cl = cluster_preset("paper")
    jobs = generate(preset("paper", n_jobs=2000, load=1.2), cl, np.random.default_rng(seed)).jobs
    assert assert_same_runs(cl, jobs, config, rng_at(seed, seed % 2 == 1), python_calls) > 0


@st.composite
def scenarios(draw):
    cl, jobs = draw(small_workloads())
    config = {
        "queue": draw(st.sampled_from(["priority", "fifo"])),
        "backfill": draw(st.booleans()),
        "placement": draw(st.sampled_from(["best-fit", "first-fit"])),
        "max_preemptions": draw(st.integers(1, 3)),
        "restart_overhead": float(draw(st.sampled_from([0.0, 2.0]))),
    }
    return cl, jobs, config, rng_at(draw(st.integers(0, 2**64 - 1)), draw(st.booleans()))


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_generated_workloads(scenario):
    calls = {"n": 0}  # hypothesis runs examples without function-scoped fixtures: count by hand
    original = RandomPreemption._evaluate_node

    def counting(self, *args):  # noqa: ANN001
        calls["n"] += 1
        return original(self, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(RandomPreemption, "_evaluate_node", counting)
        assert_same_runs(*scenario, calls)


def test_other_generators_and_subclasses_are_asked_in_python(python_calls):
    cl = cluster_preset("paper")
    jobs = generate(preset("paper", n_jobs=500, load=1.3), cl, np.random.default_rng(4)).jobs
    for rng, policy_class in (
        (np.random.Generator(np.random.MT19937(4)), RandomPreemption),
        (np.random.default_rng(4), OwnRandom),
    ):
        python_calls["n"] = 0
        _, want = run("python", cl, jobs, {}, copy.deepcopy(rng), policy_class)
        evaluated = python_calls["n"]
        _, got = run("native", cl, jobs, {}, copy.deepcopy(rng), policy_class)
        assert python_calls["n"] == 2 * evaluated > 0  # asked in Python, on the native engine as well
        assert_same_results(want, got)


# ----------------------------------------------------------------------------------------------------------
# Pickling and copying a native run (replayed from the Generator's state at the start of the run)
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def native_run():
    cl = cluster_preset("paper")
    jobs = generate(preset("paper", n_jobs=1500, load=1.3), cl, np.random.default_rng(6)).jobs
    rng = np.random.default_rng(6)
    start = copy.deepcopy(rng)
    sim, result = run("native", cl, jobs, {"max_preemptions": 2}, rng)
    assert result.n_preemptions > 0
    return cl, jobs, sim, result, start, rng


def test_a_run_from_another_state_differs(native_run):
    # What the replays below must get right: starting from the state at the end of the run instead of the one
    # at its start gives another run.
    cl, jobs, _, result, _, rng = native_run
    _, other = run("native", cl, jobs, {"max_preemptions": 2}, copy.deepcopy(rng))
    assert not np.array_equal(other.completion, result.completion)


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "pickle twice", "deepcopy of a copy"])
def test_a_native_random_run_pickles_and_copies_by_replay(native_run, how):
    _, _, sim, result, start, rng = native_run
    end = rng.bit_generator.state
    if how == "pickle":
        twin = pickle.loads(pickle.dumps(sim))
    elif how == "deepcopy":
        twin = copy.deepcopy(sim)
    elif how == "pickle twice":  # a replayed run must itself replay from the start
        twin = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(sim))))
    else:
        twin = copy.deepcopy(copy.deepcopy(sim))
    assert twin.done
    assert_same_results(result, twin.result())
    assert rng.bit_generator.state == end  # the live Generator is not drawn from again
    assert twin._replay.native_rule[1]["rng"].bit_generator.state == start.bit_generator.state
    assert sim._replay.native_rule[1]["rng"].bit_generator.state == start.bit_generator.state
