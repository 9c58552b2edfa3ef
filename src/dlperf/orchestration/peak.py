"""`dlperf peak`'s job: measure the matmul rate per dtype on a device and keep it in the peaks file, which runs on
that device then read for MFU against the measured peak beside the datasheet one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlperf.engines.torch.peak import measure_peaks, merge_stored, read_stored
from dlperf.errors import ConfigError
from dlperf.records.store import write_json_atomic
from dlperf.user_files import read_user_file


def measure_and_store(
    device: str, dtypes: list[str], shapes: list[tuple[int, int, int]] | None, iters: int, out: str | Path
) -> dict[str, dict[str, Any]]:
    """Each dtype's best sustained rate over `shapes` (None: a sweep for the device), merged into the peaks file
    `out`; the results. A peaks file that cannot be read is refused before measuring, not after."""
    if Path(out).exists():  # a FIFO or folder here would hang or fail at the end
        read_user_file(out, "peaks file")
    try:
        results = measure_peaks(device, dtypes, shapes=shapes, iters=iters)
    except (RuntimeError, MemoryError) as error:
        if not _is_out_of_memory(error):
            raise
        raise ConfigError("the GEMM shapes do not fit in the device's memory: choose smaller --shapes") from None
    write_json_atomic(out, merge_stored(read_stored(out), results))
    return results


def _is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or "alloc" in str(error) or "out of memory" in str(error)
