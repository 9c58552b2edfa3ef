"""Counts in words: `1 device`, `2 devices`, `0.4M parameters`, so no message says "1 devices" or "0M"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`1 device`, `2 devices` (`plural` where adding an s is wrong)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def magnitude(n: float) -> str:
    """A large count in two or three significant figures: 26M, 1.2B, 0.4M stays 410k, 52k, 950."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            value = n / size
            return f"{value:.0f}{suffix}" if value >= 10 else f"{value:.1f}{suffix}"
    return f"{n:.0f}"
