from ppo_bootstrap.modules.actor_critic import ActorCritic, Memory, PolicyConfig, State
from ppo_bootstrap.modules.normalizer import EmpiricalNormalization

__all__ = ["ActorCritic", "EmpiricalNormalization", "Memory", "PolicyConfig", "State"]
