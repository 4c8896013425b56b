"""Episode dataset: round trip of flags, causes and terminal observations; episode separation; atomic writes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from isaac_adapter.evaluation.dataset import EpisodeDatasetWriter, read_episodes, read_metadata
from scripted_env import ScriptedEnv

CAUSE_NAMES = ("none", "height", "tilt", "lateral", "timeout")


def record(path, steps: int = 7, **writer_kwargs):
    """ScriptedEnv, 3 envs: env 0 falls at step 2 (cause tilt); env 1 times out at step 4; env 2 falls on
    its time-limit step 4 (both flags, cause height). Observations: +1 per step, final ``100 + 10 env + t``,
    respawn at ``50 + env``."""
    ends = {(2, 0): (True, False), (4, 1): (False, True), (4, 2): (True, True)}
    causes = {(2, 0): 2, (4, 1): 4, (4, 2): 1}
    env = ScriptedEnv(3, ends, privileged=True)
    obs = env.reset()
    writer = EpisodeDatasetWriter(path, 3, 0.02, groups=("policy", "critic"), cause_names=CAUSE_NAMES,
                                  metadata={"note": "scripted"}, **writer_kwargs)
    for t in range(steps):
        actions = torch.full((3, 1), float(t))
        cause = torch.tensor([causes.get((t, e), 0) for e in range(3)])
        result = env.step(actions)
        writer.add_step(obs, actions, result, cause)
        obs = result.obs
    return writer


def test_round_trip_and_episode_separation(tmp_path):
    path = tmp_path / "episodes.parquet"
    record(path).close()
    episodes = {e.episode_id: e for e in read_episodes(path)}
    # ids: envs start 0, 1, 2; ends in order env 0 (step 2) -> 3, env 1 (step 4) -> 4, env 2 (step 4) -> 5
    assert {i: (e.env_id, e.length) for i, e in episodes.items()} == {
        0: (0, 3), 1: (1, 5), 2: (2, 5), 3: (0, 4), 4: (1, 2), 5: (2, 2)}

    fall = episodes[0]
    assert fall.observation[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert fall.terminated.tolist() == [False, False, True] and not fall.truncated.any()
    assert fall.termination_cause == "tilt"
    assert fall.terminal_observation.tolist() == [102.0]  # the pre-reset final observation
    assert fall.extra["terminal_observation_critic"].tolist() == [102.0, -102.0]
    assert fall.step.tolist() == [0, 1, 2] and fall.time_s.tolist() == pytest.approx([0.0, 0.02, 0.04])
    assert fall.action[:, 0].tolist() == [0.0, 1.0, 2.0]

    # the step after the reset starts episode 3 at the respawn observation 50; it never joins episode 0
    after = episodes[3]
    assert after.rollout_step[0] == 3 and after.step[0] == 0 and after.observation[0, 0] == 50.0
    assert 50.0 not in fall.observation[:, 0]

    timeout = episodes[1]
    assert timeout.truncated[-1] and not timeout.terminated[-1] and timeout.termination_cause == "timeout"
    assert timeout.terminal_observation.tolist() == [114.0]
    both = episodes[2]
    assert both.terminated[-1] and both.truncated[-1] and both.termination_cause == "height"
    assert not any(e.horizon_end for e in (fall, timeout, both))

    # episodes open when recording stopped: no done flag, horizon_end, terminal = the observation after the last step
    open_episode = episodes[3]
    assert not open_episode.ended and open_episode.horizon_end and open_episode.termination_cause == "none"
    assert open_episode.terminal_observation.tolist() == [54.0]
    assert read_metadata(path)["note"] == "scripted" and read_metadata(path)["dt"] == 0.02


def test_write_is_atomic(tmp_path):
    path = tmp_path / "episodes.parquet"
    record(path, steps=3).close()
    before = path.read_bytes()
    writer = record(path, steps=7, flush_rows=3)  # small row groups: part of it is already on disk
    assert path.read_bytes() == before  # the destination is untouched while writing
    writer.abort()
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    with record(path, steps=7, flush_rows=3):
        pass
    assert len(read_episodes(path)) == 6 and path.read_bytes() != before


def test_reader_rejects_a_broken_boundary(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "episodes.parquet"
    record(path).close()
    table = pq.read_table(path)
    ids = table["episode_id"].to_numpy().copy()
    ids[np.flatnonzero((table["env_id"].to_numpy() == 0) & (table["rollout_step"].to_numpy() == 3))] = 0
    pq.write_table(table.set_column(table.column_names.index("episode_id"), "episode_id", [ids]), path)
    with pytest.raises(ValueError, match="episode 0"):
        read_episodes(path)
