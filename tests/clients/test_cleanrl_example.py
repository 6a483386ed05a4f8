"""examples/cleanrl_masked_ppo.py, a CleanRL-style single-file PPO with invalid-action masking over the native
vector environment, run as a user runs it. The environment keeps its default ``illegal_action="raise"``, so a
run that ends cleanly took no illegal action; the run's summary shows that the mask had actions to rule out."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "cleanrl_masked_ppo.py"
ID = "schedgym/Preemption-v1"
STEPS = 4096  # 8 updates of 4 envs x 128 steps: about 130 episodes of the registered id
LIMIT = 30


def _run(output: Path, *args: str) -> str:
    cmd = [sys.executable, str(SCRIPT), "--total-timesteps", str(STEPS), "--seed", "0", "--output", str(output), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=output.parent, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.parametrize("mode", ["next-step", "same-step"])
def test_masked_ppo_trains_without_an_illegal_action_and_writes_its_outputs(mode: str, tmp_path: Path):
    output = tmp_path / "run"
    # A limit below the usual episode length (about 30 steps) so that both ends occur: truncated episodes
    # bootstrap from their final observation, terminated ones do not.
    stdout = _run(output, "--autoreset-mode", mode, "--env-kwargs", json.dumps({"max_episode_steps": LIMIT}))

    summary = json.loads((output / "summary.json").read_text())
    assert summary["global_step"] == STEPS and summary["autoreset_mode"] == mode
    assert 0 < summary["masked_out_share"] < 1  # the mask did rule actions out, and raise would have caught one
    with (output / "episodes.csv").open(newline="") as f:
        episodes = list(csv.DictReader(f))
    assert len(episodes) == summary["episodes"] >= 10
    returns = [float(e["return"]) for e in episodes]
    assert all(math.isfinite(r) and r < 0 for r in returns)
    lengths = [int(e["length"]) for e in episodes]
    assert all(0 < n <= LIMIT for n in lengths) and LIMIT in lengths and min(lengths) < LIMIT
    assert math.isclose(summary["mean_return"], float(np.mean(returns)))

    # The rows trained on: every step, less (next-step) the reset step after each episode's end, which the run
    # took unless the episode ended on its very last step.
    trained = sum(int(n) for n in re.findall(r"samples=(\d+)/", stdout))
    resets = sum(int(e["global_step"]) < STEPS for e in episodes) if mode == "next-step" else 0
    assert trained == STEPS - resets


def test_the_saved_agent_acts_legally_on_a_fresh_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    output = tmp_path / "run"
    _run(output, "--total-timesteps", "1024")
    saved = torch.load(output / "model.pt", weights_only=True)
    assert saved["args"]["env_id"] == ID and saved["args"]["total_timesteps"] == 1024

    spec = importlib.util.spec_from_file_location("cleanrl_masked_ppo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses looks its module up there
    spec.loader.exec_module(module)  # defines Agent; the training runs only as __main__
    env = gym.make(ID)  # illegal_action="raise"
    agent = module.Agent(int(np.prod(env.observation_space.shape)), int(env.action_space.n))
    agent.load_state_dict(saved["state_dict"])

    obs, info = env.reset(seed=1)
    done, steps = False, 0
    while not done:
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32)[None]
            action, _, _, _ = agent.get_action_and_value(x, torch.as_tensor(info["action_mask"])[None])
        obs, reward, terminated, truncated, info = env.step(int(action))
        done, steps = terminated or truncated, steps + 1
    assert steps > 0 and terminated
