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
    """Register the bundled agents, one per entry of ``agents/bundled/manifest.json`` (their names and
    descriptions; their files are checked against their SHA-256 sums when an agent is made), and the loader of
    ``NAME:PATH`` (:func:`load_agent`) with :mod:`schedgym.registry` (the ``schedgym.policies`` entry point
    ``agents``)."""
    from agents.manifest import BUNDLED_DIR, read_manifest
    from schedgym.registry import register_agent_loader, register_policy

    register_agent_loader(load_agent)
    for agent in read_manifest().values():
        register_policy(
            agent.name,
            "agents.learned:bundled_agent",
            kwargs={"name": agent.name},
            description=agent.description,
            learned=True,
            files=[BUNDLED_DIR / name for name in agent.files()],
        )


__all__ = ["Agent", "HeuristicAgent", "LearnedPolicy", "load_agent", "register"]
