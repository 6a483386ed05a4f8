"""Results do not move (issue 20): the working tree reproduces, exactly and on both engines, the reference results
recorded from the pristine code in ``tests/data/golden_results.json``: ``compare`` per seed for every rule and
bundled agent on paper, realistic and philly, and seeded environment episodes (tests/golden.py says what
and how, and when the file may be regenerated: never to make a refactor pass).

The default cases take some 6 s on the native engine and 20-25 s on the Python one; the larger ones, marked slow
(``-m slow``), some 4 min on the native engine (mostly the lookahead variants on a philly window, checked on the
native engine only) and 7-10 min on the Python one.
"""

from __future__ import annotations

import re

import golden
import pytest

from schedgym.sim.simulator import select_engine

DATA = golden.load()
MAX_SHOWN = 25


def _check(engine: str, kind: str, name: str, python_engine: bool = True) -> None:
    if engine == "python" and not python_engine:
        pytest.skip(f"{name} is recorded on the native engine only (hours on the Python engine)")
    assert select_engine() == engine, "the engine fixture did not select the engine this run is checked against"
    old = golden.expected(DATA, engine, kind, name)
    new = golden.compute(kind, name)
    moved = list(golden.differences(old, new))
    if not moved:
        return
    if kind == "compare":  # per_seed[i] -> the seed itself
        seeds = old["seeds"]
        where = f"compare case {name!r} (workload {old['workload']}, seeds {seeds}), POLICY.per_seed[seed].figure"
        moved = [
            (re.sub(r"per_seed\[(\d+)\]", lambda m: f"per_seed[seed {seeds[int(m[1])]}]", p), a, b) for p, a, b in moved
        ]
    else:
        where = f"episode {name!r}"
    lines = [f"  {path}: recorded {a!r}, now {b!r}" for path, a, b in moved[:MAX_SHOWN]]
    if len(moved) > MAX_SHOWN:
        lines.append(f"  ... and {len(moved) - MAX_SHOWN} more")
    pytest.fail(
        f"{len(moved)} results of {where} moved on the {engine} engine from those recorded at "
        f"{DATA['recorded_from'][:12]} (tests/data/golden_results.json):\n" + "\n".join(lines),
        pytrace=False,
    )


def _params(cases, slow: bool) -> list:  # noqa: ANN001
    return [pytest.param(c, id=c.name) for c in cases if getattr(c, "slow", False) == slow]


@pytest.mark.parametrize("case", _params(golden.COMPARE_CASES, slow=False))
def test_compare_results_do_not_move(engine: str, case: golden.CompareCase) -> None:
    _check(engine, "compare", case.name, case.python_engine)


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(golden.COMPARE_CASES, slow=True))
def test_compare_results_do_not_move_larger(engine: str, case: golden.CompareCase) -> None:
    _check(engine, "compare", case.name, case.python_engine)


@pytest.mark.parametrize("case", _params(golden.EPISODE_CASES, slow=False))
def test_episodes_do_not_move(engine: str, case: golden.EpisodeCase) -> None:
    _check(engine, "episodes", case.name)


def test_every_policy_is_recorded() -> None:
    """Every registered policy has reference results (on philly too, the lookahead variants in the slow cases)."""
    from schedgym.registry import policy_names

    missing = sorted(set(policy_names()) - set(golden.POLICIES))
    assert not missing, (
        f"{missing} are registered but have no reference results: add them to golden.POLICIES and record them "
        "(python tests/golden.py --write --case ...), leaving the other policies' results as they are"
    )
    for case in golden.COMPARE_CASES:
        recorded = golden.expected(DATA, "native", "compare", case.name)["policies"]
        assert sorted(recorded) == sorted(case.policy_names()), case.name
    philly = {p for c in golden.COMPARE_CASES if c.workload == "philly" for p in c.policy_names()}
    assert philly == set(golden.POLICIES), sorted(set(golden.POLICIES) - philly)
