"""Adapters from simulator env APIs to the :class:`ppo_bootstrap.env.VecEnv` protocol.

* :class:`~isaac_adapter.adapters.isaaclab.IsaacLabVecEnv`: Isaac Lab ``DirectRLEnv`` /
  ``ManagerBasedRLEnv`` (3.x through ``cfg.compute_final_obs``, 2.x through a ``_reset_idx`` hook).
* :class:`~isaac_adapter.adapters.mjlab.MjlabVecEnv`: mjlab ``ManagerBasedRlEnv`` with ``auto_reset=False``.
* :class:`~isaac_adapter.adapters.gymnasium.GymnasiumVecEnv`: Gymnasium 1.x vector envs
  (``SAME_STEP``, ``NEXT_STEP`` and ``DISABLED`` auto-reset).

The Isaac Lab and mjlab adapters share one base, :class:`~isaac_adapter.adapters.base.IsaacApiVecEnv`
(action checks, group selection, episode flags, ``final_env_ids``, ``info["log"]``); each adds only
how it obtains the final observation.

Every adapter reports the true last observation of each ended env (captured before its reset),
passes ``terminated`` and ``truncated`` on as the simulator set them (both may be true), and raises
:class:`ppo_bootstrap.episode.EpisodeProtocolError` when the env cannot provide a final observation
or provides a stale one. None of them imports its simulator at import time.
"""

from isaac_adapter.adapters.gymnasium import GymnasiumVecEnv
from isaac_adapter.adapters.isaaclab import IsaacLabVecEnv, enable_final_obs
from isaac_adapter.adapters.mjlab import MjlabVecEnv, disable_auto_reset

__all__ = ["GymnasiumVecEnv", "IsaacLabVecEnv", "MjlabVecEnv", "disable_auto_reset", "enable_final_obs"]
