"""Isaac Lab side of the project; importing the package imports nothing heavy.

* :mod:`.assets` (needs no Isaac Lab): builds a local Isaac asset root with the Unitree G1 and a
  ground plane (``python -m isaac_adapter.isaaclab.assets OUT``), so Isaac Lab's G1 tasks run with
  ``ISAACSIM_ASSET_ROOT=OUT`` and no asset server.
* :mod:`.robot`: the 29-DoF G1 articulation on that USD, with the MuJoCo task's drives or Isaac
  Lab's; the one-line setup errors (:class:`~.robot.IsaacLabSetupError`).
* :mod:`.g1_direct`: the project's G1 walking task as an Isaac Lab ``DirectRLEnv``.
* :mod:`.velocity`: Isaac Lab's own ``Isaac-Velocity-Flat-G1`` on the local G1.
"""
