"""Why a G1 walk episode ended: the one cause table the task, the evaluator, datasets and plots share.

Codes 0..4 and 6 are what the env reports in ``info["termination_cause"]``; ``train_rule`` is the
evaluator's: an episode the training rule ended before any evaluation threshold was crossed.
``non_finite``: the physics state (``qpos``/``qvel``) went NaN or inf; neither a fall nor a timeout,
the episode ends as a blow-up (:func:`ppo_bootstrap.episode.end_blow_ups`: truncated, valued from
the last finite observation, reward zeroed).
Fall tensors ``[..., 3]`` have one column per signal in :data:`FALL_SIGNALS` order, which is also the
priority order of the exclusive cause (height > tilt > lateral).
"""

from __future__ import annotations

CAUSE_NONE, CAUSE_HEIGHT, CAUSE_TILT, CAUSE_LATERAL, CAUSE_TIMEOUT, CAUSE_TRAIN_RULE, CAUSE_NON_FINITE = range(7)
CAUSE_NAMES = ("none", "height", "tilt", "lateral", "timeout", "train_rule", "non_finite")  # index = code

FALL_SIGNALS = ("height", "tilt", "lateral")  # column order of every fall tensor
SIGNAL_CAUSES = (CAUSE_HEIGHT, CAUSE_TILT, CAUSE_LATERAL)  # cause code of each column
ENV_CAUSES = (CAUSE_HEIGHT, CAUSE_TILT, CAUSE_LATERAL, CAUSE_TIMEOUT, CAUSE_NON_FINITE)  # the ends an env reports

NEVER = -1  # step of an event that has not happened: a signal not crossed, an env not ended
