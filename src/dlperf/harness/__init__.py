"""The rank side, engine-agnostic: the timed loop and the body of every rank."""
