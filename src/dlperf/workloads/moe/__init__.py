"""Mixture-of-experts pre-training (the definition comes with the step)."""
