"""Agents: learned policies and the adapters that let any policy act in the environment.

Everything that acts is a :class:`schedgym.sim.Policy` (rules in ``baselines/``, learned agents here):
:class:`LearnedPolicy` decides inside the simulator through the environment's own decision protocol, and
:class:`HeuristicAgent` gives any policy stable-baselines3's ``predict`` for stepping an environment.
Training (``agents.train``) needs the ``rl`` extra; evaluating a saved agent needs only numpy.
"""

from agents.base import Agent
from agents.heuristic import HeuristicAgent
from agents.learned import LearnedPolicy, load_agent


def register() -> None:
    """Register the bundled agents and the loader of ``NAME:PATH`` (:func:`load_agent`) with
    :mod:`schedgym.registry` (the ``schedgym.policies`` entry point ``agents``)."""
    from schedgym.registry import register_agent_loader, register_policy

    register_agent_loader(load_agent)
    register_policy(
        "ppo",
        "agents.learned:bundled_agent",
        kwargs={"name": "ppo"},
        description="the bundled learned agent (MaskablePPO, evaluated in numpy)",
        learned=True,
    )
    register_policy(
        "dagger",
        "agents.learned:bundled_agent",
        kwargs={"name": "dagger"},
        description="a bundled row-scorer agent taught by lookahead (DAgger on paper, 64 rows), evaluated in numpy",
        learned=True,
    )
    register_policy(
        "dagger-nowait",
        "agents.learned:bundled_agent",
        kwargs={"name": "dagger-nowait"},
        description="dagger's recipe taught by lookahead-nowait-pc10 (never waits when it can serve), "
        "evaluated in numpy",
        learned=True,
    )
    register_policy(
        "dagger-philly",
        "agents.learned:bundled_agent",
        kwargs={"name": "dagger-philly"},
        description="dagger-nowait's recipe on Philly's training windows (64 nodes, real jobs), evaluated in numpy",
        learned=True,
    )
    register_policy(
        "dagger-realistic",
        "agents.learned:bundled_agent",
        kwargs={"name": "dagger-realistic"},
        description="dagger's recipe on the realistic workload (preemption costs 7-60 s), evaluated in numpy",
        learned=True,
    )


__all__ = ["Agent", "HeuristicAgent", "LearnedPolicy", "load_agent", "register"]
