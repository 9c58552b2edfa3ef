"""The JAX engine's runtime: jax.distributed processes, the (dp, tp) mesh and shardings, optax optimizers, and
the compiler of a workload's recipe (step.py). `JaxEngine` (engine.py) is what `--engine jax` runs; each
workload's Flax model and recipe live in its own folder (workloads/<name>/jax_*.py).
"""
