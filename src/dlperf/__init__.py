"""dlperf: benchmark deep-learning training speed and scaling."""

__version__ = "0.1.0"
