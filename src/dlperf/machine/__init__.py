"""The machine's facts: its environment, how its nodes differ, which GPUs a run has, a process tree's memory."""
