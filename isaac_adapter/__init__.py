"""Environment side of ppo_bootstrap: physics backends, tasks and env adapters.

Layering (imports only point down this list):

* :mod:`isaac_adapter.backends`: physics backends behind :class:`~isaac_adapter.backends.base.PhysicsBackend`.
* :mod:`isaac_adapter.tasks`: simulator-agnostic tasks written as functions over batched torch state.
* adapters: envs that produce :class:`ppo_bootstrap.env.StepResult` for the Runner.
"""
