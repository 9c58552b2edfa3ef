"""Errors a user can fix: the CLI prints them as one line and exits non-zero, without a traceback."""


class DlperfError(Exception):
    """Base of every user-facing error; the message says what is wrong and how to fix it."""

    exit_code = 2


class ConfigError(DlperfError):
    """A flag, config value or YAML file that is invalid or does not divide."""


class DataError(DlperfError):
    """A data folder or file that is missing or unusable."""


class LaunchError(DlperfError):
    """Worker processes could not be started or ended badly."""

    exit_code = 1


class ResultsError(DlperfError):
    """A results folder that cannot be written, or holds nothing to report."""


MAX_MESSAGE = 1000


def first_line(error: BaseException) -> str:
    """An outside library's error as one line (a driver's or a client's message runs over several)."""
    text = str(error).strip()
    return clip(text.splitlines()[0]) if text else type(error).__name__


def clip(message: str, limit: int = MAX_MESSAGE) -> str:
    """A message cut to `limit` characters: a value quoted from hostile input must not make a 52 MB error line."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}... ({len(message) - limit} more characters)"
