"""GPT pre-training with data, tensor and pipeline parallelism (the published GPT report's cases)."""
