"""The optional extras (dlperf.install.extra): a command that needs one refuses, naming it, before it writes."""

from __future__ import annotations

import importlib

from dlperf.errors import ConfigError
from dlperf.install import extra as install


def require_extra(module: str, extra: str, purpose: str) -> None:
    """Refuse in one line where `module` cannot be imported, saying which extra brings it."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{purpose} needs the {module} package: {install(extra)}") from None
