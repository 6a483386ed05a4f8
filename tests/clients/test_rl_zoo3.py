"""rl_zoo3 trains PPO on the environment as its documentation takes a registered env: ``python -m
rl_zoo3.train --gym-packages schedgym`` with the hyperparameters the project ships
(``examples/rl_zoo3/ppo.yml``), and ``python -m rl_zoo3.enjoy`` runs the saved agent."""

from __future__ import annotations

import base64
import csv
import json
import math
import os
import pickle
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("rl_zoo3")

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "examples" / "rl_zoo3" / "ppo.yml"
ID = "schedgym/Preemption-v1"
RUN = "schedgym-Preemption-v1"  # rl_zoo3's name for the id in paths
STEPS = 2048  # two PPO updates of n_envs * n_steps = 1,024 steps: about 60 episodes of the registered id


def _run(module: str, *args: str, cwd: Path) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", module, "--algo", "ppo", "--env", ID, "--gym-packages", "schedgym", *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log folder of one rl_zoo3 training run with the shipped hyperparameters, shortened with -n."""
    logs = tmp_path_factory.mktemp("zoo")
    _run(
        "rl_zoo3.train",
        *("--conf-file", str(CONF), "-n", str(STEPS), "--seed", "0", "--log-folder", str(logs)),
        *("--eval-freq", "-1", "--num-threads", "1"),
        cwd=logs,
    )
    return logs


def _monitor_rows(run: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in sorted(run.glob("*.monitor.csv")):
        with path.open(newline="") as f:
            next(f)  # the JSON header line
            rows.extend(csv.DictReader(f))
    return rows


def test_training_writes_a_model_that_stable_baselines3_loads(trained: Path):
    from gymnasium import spaces
    from stable_baselines3 import PPO

    model = PPO.load(trained / "ppo" / f"{RUN}_1" / f"{RUN}.zip", device="cpu")
    assert model.num_timesteps == STEPS
    assert type(model.action_space) is spaces.Discrete and model.action_space.n == 17
    assert type(model.observation_space) is spaces.Box and model.observation_space.shape == (228,)


def test_the_monitor_files_count_finished_episodes_and_the_illegal_actions_taken(trained: Path):
    rows = _monitor_rows(trained / "ppo" / f"{RUN}_1")
    assert len(rows) >= 10, f"expected many short episodes in {STEPS} steps, got {len(rows)}"
    for row in rows:
        assert math.isfinite(float(row["r"])) and float(row["r"]) < 0  # a slowdown accrues while jobs wait
        length, illegal = int(row["l"]), int(row["illegal_actions"])
        assert 0 <= illegal <= length  # plain PPO may pick a row the mask rules out; each one was taken as 0
    steps = sum(int(r["l"]) for r in rows)
    illegal = sum(int(r["illegal_actions"]) for r in rows)
    # Not asserted to be 0: PPO cannot mask. Printed so a run shows how often "wait" stood in.
    print(f"rl_zoo3 PPO: {len(rows)} episodes, {steps} steps, {illegal} illegal actions taken as 0")


def test_the_model_zip_holds_plain_gymnasium_spaces_and_loads_without_schedgym(trained: Path):
    path = trained / "ppo" / f"{RUN}_1" / f"{RUN}.zip"
    with zipfile.ZipFile(path) as z:
        data = json.loads(z.read("data"))
    for key in ("action_space", "observation_space"):
        blob = base64.b64decode(data[key][":serialized:"])
        assert b"schedgym" not in blob, f"the pickled {key} refers to schedgym"
        assert type(pickle.loads(blob)).__module__.startswith("gymnasium.spaces")
    # The proof: a process in which schedgym cannot be imported loads the model and acts.
    code = (
        "import sys; sys.modules['schedgym'] = None\n"
        "import numpy as np\n"
        "from stable_baselines3 import PPO\n"
        f"model = PPO.load({str(path)!r}, device='cpu')\n"
        "action, _ = model.predict(np.zeros(model.observation_space.shape, np.float32), deterministic=True)\n"
        "print(type(model.action_space).__name__, int(action))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    name, action = proc.stdout.split()
    assert name == "Discrete" and 0 <= int(action) < 17


def test_enjoy_runs_the_saved_agent(trained: Path):
    out = _run(
        "rl_zoo3.enjoy",
        *("-f", str(trained), "--exp-id", "1", "-n", "200", "--no-render", "--num-threads", "1"),
        cwd=trained,
    )
    rewards = [float(r) for r in re.findall(r"^Episode Reward: (\S+)$", out, re.MULTILINE)]
    assert rewards and all(math.isfinite(r) for r in rewards), out[-2000:]
