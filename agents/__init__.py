"""Agents: learned policies and the adapters that let any policy act in the environment.

Everything that acts is a :class:`schedgym.sim.Policy` (rules in ``baselines/``, learned agents here):
:class:`LearnedPolicy` decides inside the simulator through the environment's own decision protocol, and
:class:`HeuristicAgent` gives any policy stable-baselines3's ``predict`` for stepping an environment.
Training (``agents.train``) needs the ``rl`` extra; evaluating a saved agent needs only numpy.
"""

from agents.base import Agent
from agents.heuristic import HeuristicAgent
from agents.learned import LearnedPolicy, load_agent

__all__ = ["Agent", "HeuristicAgent", "LearnedPolicy", "load_agent"]
