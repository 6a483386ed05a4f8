"""TorchRL takes the environment its documented ways: ``GymEnv(id)`` for one environment, and ``GymWrapper``
around the native vector environment (``gym.make_vec(..., vectorization_mode="vector_entry_point")``) for a
collector. The masks reach TorchRL's ``ActionMask`` transform and a ``MaskedOneHotCategorical`` policy.

``GymEnv(id, num_envs=n)`` is not used: it builds Gymnasium's ``AsyncVectorEnv`` of ``gym.make`` (not the
native vector environment) in the next-step autoreset mode, which TorchRL 0.14.1 does not handle (the terminal
observation arrives as zeros and the step after it is the autoreset), with CartPole as with this environment.
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import Binary, Unbounded  # noqa: E402
from torchrl.envs import ActionMask, Compose, DTypeCastTransform, GymEnv, GymWrapper, TransformedEnv  # noqa: E402
from torchrl.envs.libs.gym import default_info_dict_reader  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402
from torchrl.modules import MLP, MaskedOneHotCategorical, ProbabilisticActor  # noqa: E402

import schedgym  # noqa: E402, F401  (registers the environments)
from schedgym.errors import IllegalDecisionError  # noqa: E402

ID = "schedgym/Preemption-v1"
SMALL = {"n_jobs": 200, "load": 2.0}
"""about 13 decisions an episode, most of them with several preemptions legal: many short episodes, and a mask
that matters"""
N_ENVS = 4
FRAMES = 2000


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    # the CI machine's cores are shared; a tiny MLP gains nothing from more threads
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _unmasked() -> GymEnv:
    """A client that does not mask: an illegal random action is taken as 0 (counted in ``info``, which TorchRL
    cannot read here: its ``default_info_dict_reader`` takes numpy values only, and a single environment's
    ``info`` holds Python numbers)."""
    return GymEnv(ID, illegal_action="wait")


def _masked_from_info() -> TransformedEnv:
    """The default environment (an illegal action raises), its mask read from ``info`` into TorchRL's
    ``ActionMask``, which masks the random actions of ``check_env_specs`` and ``rollout``."""
    env = GymEnv(ID)
    n = env.action_spec.space.n
    env.set_info_dict_reader(
        default_info_dict_reader(["action_mask"], spec={"action_mask": Binary(n, dtype=torch.bool)})
    )
    return TransformedEnv(env, ActionMask())


# The default environment unmasked fails check_env_specs with about one seed in seven: a random action is
# illegal at the first decision and raises IllegalDecisionError, as it should.
@pytest.mark.parametrize("make_env", [_unmasked, _masked_from_info], ids=["illegal_action=wait", "mask-from-info"])
def test_gym_env_by_id_passes_check_env_specs(make_env):
    env = make_env()  # TorchRL's GymEnv first passes frameskip and drops it on the env's TypeError
    assert env.batch_size == torch.Size([])
    assert env.action_spec.space.n == gym.make(ID).action_space.n
    for seed in range(10):
        torch.manual_seed(seed)
        check_env_specs(env, seed=seed)
    data = env.rollout(200, break_when_any_done=False)
    assert int(data["next", "done"].sum()) >= 3  # the default episode, 500 jobs
    if make_env is _unmasked:  # what "wait" absorbed: unmasked random actions on the default environment raise
        strict = GymEnv(ID)
        torch.manual_seed(0)
        strict.set_seed(0)
        with pytest.raises(IllegalDecisionError):
            strict.rollout(200, break_when_any_done=False)
        strict.close()
    else:
        chosen = data["action"].argmax(-1)
        assert bool(data["action_mask"].gather(-1, chosen.unsqueeze(-1)).all())
    env.close()


def test_gym_env_with_the_action_mask_transform_steps_legal_actions_only():
    # illegal_action stays "raise": one illegal random action would end the rollout with an error
    env = TransformedEnv(GymEnv(ID, observation="dict", **SMALL), ActionMask())
    check_env_specs(env, seed=0)
    data = env.rollout(300, break_when_any_done=False)
    assert data.batch_size == torch.Size([300])
    assert int(data["next", "done"].sum()) >= 5
    chosen = data["action"].argmax(-1)
    assert int((chosen != 0).sum()) >= 50  # preemptions were drawn, not only the always-legal 0
    assert bool(data["action_mask"].bool().gather(-1, chosen.unsqueeze(-1)).all())
    env.close()


def test_gym_wrapper_refuses_the_next_step_autoreset_mode():
    venv = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", **SMALL)
    with pytest.raises(RuntimeError, match="SAME_STEP or DISABLED"):
        GymWrapper(venv)
    venv.close()


def _disabled_env() -> TransformedEnv:
    """TorchRL's preferred mode: it resets the ended sub-environments itself with ``options={"reset_mask": ...}``.
    A partial reset gives ``info`` for the reset sub-environments only (Gymnasium's rule), and TorchRL's info
    reader does not read the ``_key`` masks, so ``info["action_mask"]`` would be zeros for the others: the mask
    comes from the observation, which the partial reset keeps, cast to the bool that TorchRL's masked
    distributions take."""
    venv = gym.make_vec(
        ID,
        num_envs=N_ENVS,
        vectorization_mode="vector_entry_point",
        autoreset_mode="disabled",
        observation="dict",
        illegal_action="wait",
        **SMALL,
    )
    env = GymWrapper(venv)
    env.set_info_dict_reader(
        default_info_dict_reader(
            ["illegal_actions"], spec={"illegal_actions": Unbounded(shape=(N_ENVS,), dtype=torch.int64)}
        )
    )
    return TransformedEnv(
        env, Compose(DTypeCastTransform(torch.float32, torch.bool, in_keys=["action_mask"]), ActionMask())
    )


def _same_step_env() -> TransformedEnv:
    """The flat observation: in this mode TorchRL reads every ``info`` key itself (``final_obs`` included), the
    bool ``action_mask`` and ``illegal_actions`` among them."""
    venv = gym.make_vec(
        ID,
        num_envs=N_ENVS,
        vectorization_mode="vector_entry_point",
        autoreset_mode="same-step",
        illegal_action="wait",
        **SMALL,
    )
    env = GymWrapper(venv)  # a TransformedEnv already: TorchRL's VecGymEnvTransform swaps in final_obs
    env.append_transform(ActionMask())
    return env


@pytest.mark.parametrize(
    "make_env, obs_key",
    [(_disabled_env, "observations"), (_same_step_env, "observation")],
    ids=["disabled", "same-step"],
)
def test_a_collector_over_the_native_vector_env_takes_legal_actions_and_counts_episodes(make_env, obs_key):
    torch.manual_seed(0)
    env = make_env()
    check_env_specs(env, seed=0)
    assert env.batch_size == torch.Size([N_ENVS])
    n_obs, n_actions = env.observation_spec[obs_key].shape[-1], env.action_spec.shape[-1]
    logits = TensorDictModule(MLP(in_features=n_obs, out_features=n_actions, num_cells=[32]), [obs_key], ["logits"])
    policy = ProbabilisticActor(
        logits,
        in_keys={"logits": "logits", "mask": "action_mask"},
        distribution_class=MaskedOneHotCategorical,
        spec=env.full_action_spec["action"],
    )
    per_batch = 400
    collector = Collector(
        env, policy, frames_per_batch=per_batch, total_frames=FRAMES, auto_register_policy_transforms=False
    )
    batches = [batch.clone() for batch in collector]
    collector.shutdown()

    assert len(batches) == FRAMES // per_batch
    assert all(b.batch_size == torch.Size([N_ENVS, per_batch // N_ENVS]) for b in batches)
    done = torch.cat([b["next", "done"] for b in batches], 1).squeeze(-1)
    assert int(done.sum()) >= 60  # about 150 episodes end in 2000 steps
    assert bool(torch.cat([b["next", "terminated"] for b in batches], 1).squeeze(-1).eq(done).all())
    for b in batches:
        reward = b["next", "reward"]
        assert bool(reward.isfinite().all()) and float(reward.sum()) < 0  # slowdown accrues as a cost
        chosen = b["action"].argmax(-1)
        assert bool(b["action_mask"].gather(-1, chosen.unsqueeze(-1)).all())
        assert int(b["next", "illegal_actions"].max()) == 0
        # The steps of an episode chain, and a done is followed by a new episode's first observation. A terminal
        # observation is all zeros (the cluster drained), and so is a first one with nothing to decide (about
        # one in seventy): in the next-step mode, which TorchRL mishandles, every done would chain.
        ended = b["next", "done"][:, :-1].squeeze(-1)
        chained = (b[obs_key][:, 1:] == b["next", obs_key][:, :-1]).all(-1)
        assert bool(chained[~ended].all())
        assert int(chained[ended].sum()) <= max(2, int(ended.sum()) // 5)
    assert int(sum((b["action"].argmax(-1) != 0).sum() for b in batches)) >= 500
    env.close()
