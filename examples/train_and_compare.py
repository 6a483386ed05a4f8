"""Train a MaskablePPO agent for a few seconds, then compare it with the rules on the same workloads: the
README's ``schedgym train`` then ``schedgym compare --policies ...,mine:PATH``, from Python. Needs the rl
extra (``pip install -e ".[rl]"``). A few thousand steps make a smoke test, not a good agent.

    python examples/train_and_compare.py [--steps N] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from agents.train import train
from agents.train_config import TrainConfig
from schedgym.experiments.compare import CompareConfig, run_comparison
from schedgym.experiments.report import markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4096, help="training steps (decisions)")
    parser.add_argument("--run-dir", type=Path, default=None, help="where runs go (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = TrainConfig.of(
            total_timesteps=args.steps,
            n_envs=2,
            eval_freq=0,  # evaluate once, at the end, on two validation workloads
            n_eval_workloads=2,
            env_kwargs={"n_jobs": 300},
            run_dir=str(args.run_dir or tmp),
            seed=0,
        )
        run = train(config)  # the run's folder: model.zip, best_model.zip, each with its .json
        print(f"trained: {run}")
        # Any saved agent is a policy by name: NAME:PATH, evaluated in numpy inside the simulator.
        compare = CompareConfig(policies=("fitgpp", "k8s", f"mine:{run / 'model.zip'}"), seeds=3, n_jobs=1000)
        print(markdown_table(run_comparison(compare)))


if __name__ == "__main__":
    main()
