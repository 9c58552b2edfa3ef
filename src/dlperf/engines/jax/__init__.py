"""The JAX engine: Flax models, optax optimizers and XLA-compiled steps over a JAX device mesh.

`JaxEngine` (engine.py) is what `--engine jax` runs; `build_jax_step`/`prepare_step` (step.py) build the step;
`check_supported` (support.py) validates without importing JAX.
"""
