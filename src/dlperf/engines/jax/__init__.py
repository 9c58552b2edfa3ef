"""The JAX engine: Flax models, optax optimizers and XLA-compiled steps over a JAX device mesh.

`build_jax_step` (step.py) is the entry point; `check_supported` (support.py) validates without importing JAX.
"""
