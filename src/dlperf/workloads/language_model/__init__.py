"""What the language-model workloads (GPT, Llama) share, next-token pre-training on token windows: the token file
(tokens.py, numpy only), PyTorch's batches and loss (torch_data.py), and JAX's token rows, attention kernel and
training recipe (jax_parts.py). Each model's own layers, layout and plan stay in its folder."""
