"""Gymnasium's own vector wrappers over the native vector environment (``make_vec`` with the vector entry
point): ``RecordEpisodeStatistics`` in lockstep with the same wrapper over Gymnasium's ``SyncVectorEnv``, and
``RecordVideo`` (which needs moviepy)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import schedgym  # noqa: F401  (registers the environments)

ID = "schedgym/Preemption-v1"
KWARGS = {"n_jobs": 400, "max_candidates": 4}  # episodes of 13-28 decisions


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_record_episode_statistics_counts_the_native_vector_env_as_it_counts_sync_vector_env(mode):
    n = 3
    native = RecordEpisodeStatistics(
        gym.make_vec(ID, num_envs=n, vectorization_mode="vector_entry_point", autoreset_mode=mode.value, **KWARGS)
    )
    sync = RecordEpisodeStatistics(
        SyncVectorEnv([lambda: gym.make(ID, **KWARGS) for _ in range(n)], autoreset_mode=mode)
    )
    _, info = native.reset(seed=5)
    sync.reset(seed=5)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(400):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        *_, info = native.step(actions)
        *_, expected = sync.step(actions)
        assert ("episode" in info) == ("episode" in expected)
        if "episode" in info:
            assert info["_episode"].tolist() == expected["_episode"].tolist()
            done = info["_episode"]
            assert info["episode"]["l"][done].tolist() == expected["episode"]["l"][done].tolist()
            assert np.allclose(info["episode"]["r"][done], expected["episode"]["r"][done], rtol=1e-12, atol=0)
            assert np.isfinite(info["episode"]["r"][done]).all() and (info["episode"]["l"][done] > 1).all()
            finished += int(done.sum())
            if finished >= 6:
                break
    assert finished >= 6
    assert list(native.return_queue) == pytest.approx(list(sync.return_queue), rel=1e-12)
    assert list(native.length_queue) == list(sync.length_queue)


def test_record_video_writes_the_native_vector_env(tmp_path):
    pytest.importorskip("moviepy", reason="RecordVideo writes with moviepy")
    from gymnasium.wrappers.vector import RecordVideo

    venv = gym.make_vec(ID, num_envs=2, vectorization_mode="vector_entry_point", render_mode="rgb_array", **KWARGS)
    venv = RecordVideo(venv, str(tmp_path), step_trigger=lambda t: t == 0, video_length=5)
    venv.reset(seed=0)
    frame = venv.render()[0]
    for _ in range(6):
        venv.step(venv.action_space.sample())
    venv.close()
    videos = list(tmp_path.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1_000
    import imageio.v3 as iio  # moviepy's own dependency

    frames = iio.imread(videos[0])
    height, width = frame.shape[:2]
    assert frames.shape[0] >= 5 and frames.shape[1:3] == (height, 2 * width)  # the two sub-environments, tiled
