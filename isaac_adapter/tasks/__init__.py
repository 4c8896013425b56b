"""Tasks: observation, reward and termination terms over batched torch state."""
