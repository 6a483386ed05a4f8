"""Agents: everything that acts in the environment through SB3's ``predict`` interface.

Baseline rules act through :class:`HeuristicAgent`; learned agents (stable-baselines3) arrive with the
learned-agents issue and share the same interface.
"""

from agents.base import Agent
from agents.heuristic import HeuristicAgent

__all__ = ["Agent", "HeuristicAgent"]
