"""PPO with invalid-action masking on schedgym/Preemption-v1, in the style of CleanRL's single-file ``ppo.py``.

    python examples/cleanrl_masked_ppo.py --total-timesteps 200000 --output runs/masked_ppo

It steps the native vector environment (``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``)
and reads the legal actions from ``info["action_mask"]``, so the environment keeps its default
``illegal_action="raise"``: an action outside the mask would end the run. Both of Gymnasium's autoreset modes
are handled: with next-step (the default) the step after an episode's end is a reset step whose action is
ignored, and it is left out of the update; with same-step a truncated episode bootstraps from
``info["final_obs"]``.

Writes to ``--output``: ``model.pt`` (the agent's ``state_dict`` and the arguments), ``episodes.csv`` (one row
per finished episode) and ``summary.json``. Needs torch and schedgym only (no tyro: the ``Args`` docstrings
become the ``--help`` text, as tyro would make them).
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import inspect
import json
import os
import random
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical

import schedgym  # noqa: F401  (registers the environments)


@dataclass
class Args:
    exp_name: str = "cleanrl_masked_ppo"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    threads: int = 1
    """torch intra-op threads (the environment steps in one native call per vector step)"""
    output: str = ""
    """folder for model.pt, episodes.csv and summary.json (empty: runs/{run_name})"""

    # Algorithm specific arguments
    env_id: str = "schedgym/Preemption-v1"
    """the id of the environment"""
    env_kwargs: str = "{}"
    """JSON object of keyword arguments for gymnasium.make_vec, e.g. '{"n_jobs": 500}'"""
    autoreset_mode: str = "next-step"
    """the vector environment's autoreset mode: next-step (Gymnasium's default) or same-step"""
    total_timesteps: int = 200_000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    reward_scale: float = 0.001
    """rewards are multiplied by this for training (episode returns are in the thousands, and one gradient norm
    clips actor and critic together); the logged episode returns are unscaled"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


RUNTIME = ("batch_size", "minibatch_size", "num_iterations")
"""Args fields computed from the others at run time: no command-line options"""


def parse_args() -> Args:
    # Each field's docstring is the string literal that follows it in the class body.
    body = ast.parse(inspect.getsource(Args)).body[0].body  # type: ignore[attr-defined]
    helps = {
        a.target.id: b.value.value
        for a, b in zip(body, body[1:], strict=False)
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
    }
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        if f.name in RUNTIME:
            continue
        flag, kind = "--" + f.name.replace("_", "-"), type(f.default)
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=helps.get(f.name))
        else:
            parser.add_argument(
                flag, type=float if f.default is None else kind, default=f.default, help=helps.get(f.name)
            )
    return Args(**vars(parser.parse_args()))


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, n_obs: int, n_actions: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        # A masked-out action gets a logit no sample reaches and no gradient flows into (the masked PPO of
        # Huang & Ontañón, 2020); the entropy is then over the legal actions only.
        logits = torch.where(mask, self.actor(x), torch.tensor(-1e8, dtype=torch.float32))
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def write_atomically(path: str, write, mode: str = "w") -> None:
    """Writes through a temporary file in the same folder, then renames, so a reader never sees half a file."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, mode, **({} if "b" in mode else {"newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


if __name__ == "__main__":
    args = parse_args()
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    run_name = f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{int(time.time())}"
    output = args.output or os.path.join("runs", run_name)
    os.makedirs(output, exist_ok=True)

    # TRY NOT TO MODIFY: seeding (the CPU only: cudnn's determinism flag does not apply)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")

    # env setup: the native vector environment, which takes the autoreset mode as a keyword
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode="vector_entry_point",
        autoreset_mode=args.autoreset_mode,
        **json.loads(args.env_kwargs),
    )
    # It reads metadata["autoreset_mode"], so it counts returns right in either mode.
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    next_step = envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"
    n_obs, n_actions = int(np.prod(envs.single_observation_space.shape)), int(envs.single_action_space.n)

    agent = Agent(n_obs, n_actions).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs, n_obs)).to(device)
    masks = torch.zeros((args.num_steps, args.num_envs, n_actions), dtype=torch.bool).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    # same-step: the value of a truncated episode's final observation, which the next row does not hold
    final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    # next-step: False on a reset step (its action is ignored, its reward is 0): no sample to learn from
    valid = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool).to(device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    episodes: list[tuple[int, int, float, int]] = []
    masked_out = legal = 0
    next_obs_np, infos = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32).reshape(args.num_envs, -1)
    next_mask = torch.as_tensor(infos["action_mask"], dtype=torch.bool)
    next_valid = torch.ones(args.num_envs, dtype=torch.bool)

    for iteration in range(1, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step], masks[step], valid[step] = next_obs, next_mask, next_valid
            legal += int(next_mask[next_valid].sum())
            masked_out += int((~next_mask[next_valid]).sum())

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs_np, reward, terminated, truncated, infos = envs.step(action.cpu().numpy())
            done = np.logical_or(terminated, truncated)
            rewards[step] = torch.as_tensor(reward * args.reward_scale, dtype=torch.float32)
            terminations[step] = torch.as_tensor(terminated, dtype=torch.float32)
            dones[step] = torch.as_tensor(done, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32).reshape(args.num_envs, -1)
            next_mask = torch.as_tensor(infos["action_mask"], dtype=torch.bool)
            next_valid = torch.as_tensor(~done) if next_step else torch.ones(args.num_envs, dtype=torch.bool)
            if not next_step and truncated.any():
                idx = np.flatnonzero(truncated)
                final = torch.as_tensor(np.stack(infos["final_obs"][idx]), dtype=torch.float32)
                with torch.no_grad():
                    final_values[step, idx] = agent.get_value(final.reshape(len(idx), -1)).flatten()

            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    r, length = float(infos["episode"]["r"][i]), int(infos["episode"]["l"][i])
                    episodes.append((global_step, int(i), r, length))
                    print(f"global_step={global_step}, episodic_return={r:.1f}, length={length}")

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                # next-step: after a truncation the next row holds the final observation, so values[t + 1] is
                # the right bootstrap; same-step: the next row is already the new episode's first.
                nextvalues = next_value.flatten() if t == args.num_steps - 1 else values[t + 1]
                if not next_step:
                    nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
                delta = rewards[t] + args.gamma * nextvalues * (1.0 - terminations[t]) - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - dones[t]) * lastgaelam
                lastgaelam = lastgaelam * valid[t]
                advantages[t] = lastgaelam
            returns = advantages + values

        # flatten the batch, keeping the rows that are samples of the policy
        keep = valid.reshape(-1)
        b_obs = obs.reshape((-1, n_obs))[keep]
        b_masks = masks.reshape((-1, n_actions))[keep]
        b_logprobs = logprobs.reshape(-1)[keep]
        b_actions = actions.reshape(-1)[keep]
        b_advantages = advantages.reshape(-1)[keep]
        b_returns = returns.reshape(-1)[keep]
        b_values = values.reshape(-1)[keep]

        # Optimizing the policy and value network
        b_inds = np.arange(len(b_obs))
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for mb_inds in np.array_split(b_inds, args.num_minibatches):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_masks[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                    v_loss = 0.5 * v_loss_max.mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        print(
            f"iteration={iteration}, samples={len(b_obs)}/{args.batch_size}, value_loss={v_loss.item():.4f}, "
            f"policy_loss={pg_loss.item():.4f}, approx_kl={approx_kl.item():.4f}, "
            f"clipfrac={np.mean(clipfracs):.3f}, explained_variance={explained_var:.3f}, "
            f"SPS={int(global_step / (time.time() - start_time))}"
        )

    envs.close()

    def write_episodes(f) -> None:
        csv.writer(f).writerows([("global_step", "env", "return", "length"), *episodes])

    summary = {
        "run_name": run_name,
        "env_id": args.env_id,
        "autoreset_mode": args.autoreset_mode,
        "global_step": global_step,
        "episodes": len(episodes),
        "mean_return": float(np.mean([e[2] for e in episodes])) if episodes else None,
        # the share of (observation, action) pairs the mask ruled out: how much masking had to do
        "masked_out_share": masked_out / (masked_out + legal),
        "seconds": time.time() - start_time,
    }
    write_atomically(
        os.path.join(output, "model.pt"),
        lambda f: torch.save({"state_dict": agent.state_dict(), "args": dataclasses.asdict(args)}, f),
        mode="wb",
    )
    write_atomically(os.path.join(output, "episodes.csv"), write_episodes)
    write_atomically(os.path.join(output, "summary.json"), lambda f: json.dump(summary, f, indent=2))
    print(f"wrote {output}/model.pt, episodes.csv and summary.json: {summary['episodes']} episodes")
