"""Writing a figure as a results file: rendered in memory, then written atomically like every record and table, so a
full disk or a killed report leaves either the old PNG or the new one, never half of one."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from dlperf.records.store import write_bytes_atomic

DPI = 110


def save_figure(fig: Any, path: Path) -> Path | None:
    """`fig` as a PNG at `path`, closed afterwards (matplotlib keeps every open figure); None for no figure (nothing
    measured)."""
    import matplotlib.pyplot as plt

    if fig is None:
        return None
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
    return path
