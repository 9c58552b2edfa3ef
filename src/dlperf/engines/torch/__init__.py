"""The PyTorch engine: torch.distributed (NCCL on GPUs, gloo on CPUs), CUDA events, allocator peaks."""
