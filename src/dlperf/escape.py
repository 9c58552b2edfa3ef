"""Text from records, logs, labels and file names, escaped for where it is shown: one function per medium.

Such text is whatever a log, a record edited by hand or a user's flag held: a newline would end a markdown table
row or forge a line of dlperf's own output, an escape sequence would drive the terminal, a `|` would split a
markdown cell, and `<script>` would run in the HTML report.
"""

from __future__ import annotations

import html as _html
import re

# control characters (C0, DEL, C1), format characters (bidi overrides), line and paragraph separators
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def terminal(text: object) -> str:
    """One line with no terminal escapes: every control or invisible formatting character as its escape
    (`\\n`, `\\x1b`), so what is shown can be read and copied back."""
    return UNSAFE.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), str(text))


def markdown(text: object) -> str:
    """A markdown table cell or heading: one line (as `terminal`), `|` escaped so it ends no cell."""
    return terminal(text).replace("|", "\\|")


def plot(text: object) -> str:
    """Matplotlib text: one line per `\\n` we write ourselves (as `terminal`), `$` escaped so that a record's
    text is never read as mathtext (an unknown `$\\sym$` fails the whole figure)."""
    return terminal(text).replace("$", "\\$")


def file_name(text: object) -> str:
    """A file name from record text: letters, digits, `.`, `_`, `-` kept, every other run as `_`, no leading dot
    (a model named `../../x` must not write its plot outside the report's folder)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).lstrip(".") or "_"


def html(text: object) -> str:
    """HTML text or attribute value: one line (as `terminal`), `<`, `>`, `&` and quotes escaped."""
    return _html.escape(terminal(text))
