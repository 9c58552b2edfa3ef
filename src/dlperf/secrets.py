"""Passwords and tokens kept out of every message: one masking function for store URLs and the text around them.

`urllib.parse.urlsplit` ends a URL's host at `#` or `?`, so a password holding either is not seen as userinfo and
the URL would go out whole; libpq also takes `password=` as a query parameter or a keyword of a plain DSN. So the
userinfo and the query are parsed here, by hand: everything between `://` and the last `@` of the authority is the
userinfo (its password is shown as `***`), and the value of every parameter named like a secret is `***`.
Values a process was given out of band (`PGPASSWORD`, a tracker's token) are registered and replaced wherever
they appear, so a library's error quoting them is masked too.
"""

from __future__ import annotations

import os
import re

MASK = "***"
# query parameters and DSN keywords whose values are secrets (libpq's `password`, tokens and keys of trackers)
SECRET_KEYS = r"(?:password|passwd|pwd|passfile|sslpassword|token|api_?key|secret|access_?key|auth)"
SECRET_ENV = ("PGPASSWORD", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY")
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
PARAM = re.compile(rf"(?i)(\b{SECRET_KEYS}\b\s*=\s*)('(?:[^'\\]|\\.)*'|[^&;\s]*)")
_registered: set[str] = set()


def register(secret: str | None) -> None:
    """A value to mask wherever it appears in a message from now on (a password read from the environment)."""
    if secret and len(secret) >= 3:
        _registered.add(secret)


def mask_url(url: str) -> str:
    """The URL with its password and every secret parameter shown as `***` (the user name and host kept)."""
    head, sep, rest = url.partition("://")
    if not sep:
        return mask_params(url)
    at = _userinfo_end(rest)
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        rest = f"{user}:{MASK}@{rest[at + 1 :]}" if colon else rest
    return f"{head}://{mask_params(rest)}"


def _userinfo_end(rest: str) -> int:
    """Where the userinfo ends: the last `@` before the path's first `/`, or, where a `/` comes before every `@`
    (a password holding `/`), the last `@` of all: masking too much is safe, too little is not."""
    slash = rest.find("/")
    before = rest.rfind("@", 0, slash) if slash >= 0 else rest.rfind("@")
    return before if before >= 0 else rest.rfind("@")


def mask_params(text: str) -> str:
    """`password=...` (and tokens, keys) in a query string or a libpq keyword/value DSN as `password=***`."""
    return PARAM.sub(lambda m: m[1] + MASK, text)


def mask(text: object) -> str:
    """Any message: each URL in it through `mask_url`, secret parameters masked, registered values replaced."""
    out = mask_params(URL.sub(lambda m: mask_url(m[0]), str(text)))
    for secret in sorted(_registered | _from_environment(), key=len, reverse=True):
        out = out.replace(secret, MASK)
    return out


def _from_environment() -> set[str]:
    return {value for name in SECRET_ENV if len(value := os.environ.get(name, "")) >= 3}
