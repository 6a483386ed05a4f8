"""Learned agents (stable-baselines3). Training and loading arrive with the learned-agents issue; the
baselines they will be compared with are in ``baselines``."""
