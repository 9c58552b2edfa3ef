"""The per-rank side of a run: process setup, precision handling and the timed loop."""
