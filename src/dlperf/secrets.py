"""Passwords and tokens kept out of every message: one masking function for store URLs and the text around them.

`urllib.parse.urlsplit` ends a URL's host at `#` or `?`, so a password holding either is not seen as userinfo and
the URL would go out whole; libpq also takes `password=` as a query parameter (its name percent-encoded, even) or a
keyword of a plain DSN. So the userinfo and the query are parsed here, by hand: everything between `://` and the last
`@` is the userinfo (its password is shown as `***`), and the value of every parameter named like a secret is `***`.
Each password so masked is remembered, as written, percent-decoded and in the pieces libpq would cut a raw one into
(a raw `@` makes the rest of it a host name, which an error then quotes), with the values a process was given out of
band (`PGPASSWORD`, a tracker's token, the password of a URL in `DLPERF_HISTORY`): every message masked afterwards
has them replaced wherever they appear, so a library's error quoting one (libpq's "invalid percent-encoded token"
quotes the password alone) is masked too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
# query parameters and DSN keywords whose values are secrets (libpq's `password`, tokens and keys of trackers)
SECRET_KEYS = r"(?:password|passwd|pwd|passfile|sslpassword|token|api_?key|secret|access_?key|auth)"
SECRET_ENV = ("PGPASSWORD", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY")
URL_ENV = ("DLPERF_HISTORY", "MLFLOW_TRACKING_URI", "DATABASE_URL")  # URLs whose passwords are secrets too
SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
URL_REST = re.compile(r"[^\s'\"<>]*")  # a URL after its `://`
PARAM = re.compile(rf"(?i)(\b{SECRET_KEYS}\b\s*=\s*)('(?:[^'\\]|\\.)*'|[^&;\s]*)")
SECRET_NAME = re.compile(rf"(?i)\s*{SECRET_KEYS}\s*")
# where libpq cuts a raw password it does not expect: its userinfo ends at the first `@` or `/`, its host at `:`,
# `/`, `?` or `,`, so an error names a piece of the password as a host, a port or a database
RAW_SPLIT = re.compile(r"[@/:?,#]")
SHORTEST = 3  # a shorter value is not replaced in free text: "ab" would blank every word holding it
_registered: set[str] = set()


def register(secret: str | None) -> None:
    """A value to mask wherever it appears in a message from now on (a password read from the environment)."""
    for form in {secret or "", unquote(secret or "")}:
        if len(form) >= SHORTEST and form != MASK:
            _registered.add(form)


def learn(texts: Iterable[str]) -> None:
    """Remember the passwords of the URLs and DSNs among `texts` (a command line's arguments), so that a message
    quoting one later, in whatever shape, is masked."""
    for text in texts:
        mask_url(text)


def mask_url(url: str) -> str:
    """The URL with its password and every secret parameter shown as `***` (the user name and host kept); each
    value masked is remembered (`register`)."""
    head, sep, rest = url.partition("://")
    if not sep:
        return mask_params(url)
    at = rest.rfind("@")  # the last: a password may hold `@`, `/`, `?` (masking too much is safe, too little not)
    user, colon, password = rest[: max(at, 0)].partition(":")
    if at >= 0 and colon:
        for piece in {password, *RAW_SPLIT.split(password)}:
            register(piece)
        rest = f"{user}:{MASK}@{rest[at + 1 :]}"
    path, question, query = rest.partition("?")
    return f"{head}://{mask_params(path)}{question}{_mask_query(query)}"


def _mask_query(query: str) -> str:
    """A query string's secret parameters as `name=***`, their names read percent-decoded as libpq reads them
    (`pass%77ord=` is `password=`)."""
    items = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        if equals and SECRET_NAME.fullmatch(unquote(name)):
            register(value)
            item = f"{name}={MASK}"
        items.append(mask_params(item))
    return "&".join(items)


def mask_params(text: str) -> str:
    """`password=...` (and tokens, keys) in a query string or a libpq keyword/value DSN as `password=***`."""

    def hide(match: re.Match) -> str:
        value = match[2]
        register(value[1:-1].replace("\\'", "'").replace("\\\\", "\\") if value.startswith("'") else value)
        return match[1] + MASK

    return PARAM.sub(hide, text)


def mask(text: object) -> str:
    """Any message: each URL in it through `mask_url`, secret parameters masked, registered values replaced."""
    out = mask_params(_mask_urls(str(text)))
    for secret in sorted(_registered | _from_environment(), key=len, reverse=True):
        out = out.replace(secret, MASK)
    return out


def _mask_urls(text: str) -> str:
    """Each `scheme://...` in `text` through `mask_url`, found from its `://` back to the scheme's first letter: a
    regex trying a scheme from every letter of a long word took seconds on a 40,000-character value, this is linear
    (each character is looked at once)."""
    out, done, at = [], 0, text.find("://")
    while at >= 0:
        start = at
        while start > done and text[start - 1] in SCHEME_CHARS:
            start -= 1
        while start < at and not text[start].isalpha():
            start += 1  # a scheme starts with a letter; none at all: what follows `://` is masked all the same
        end = URL_REST.match(text, at + 3).end()
        out += [text[done:start], mask_url(text[start:end])]
        done = end
        at = text.find("://", end)
    return "".join([*out, text[done:]])


def _from_environment() -> set[str]:
    """The secrets the environment gives: its password and token variables, and the passwords of its URLs."""
    learn(os.environ[name] for name in URL_ENV if name in os.environ)
    return {value for name in SECRET_ENV if len(value := os.environ.get(name, "")) >= SHORTEST}
