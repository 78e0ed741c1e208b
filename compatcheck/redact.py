"""Secrets out of everything a run writes: exception texts, logs, the environment, the command line.

Three kinds are caught wherever they occur in any text: the values of environment variables whose
names say they are secret, the password in a URL's userinfo, and token-shaped strings of the
common providers.
"""

from __future__ import annotations

import os
import re

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PAT$|_PAT_",
                         re.IGNORECASE)
MARK = "[redacted]"
# A value this short ("1", "true") would blank out unrelated text; no real secret is that short.
_MIN_SECRET = 6
_TOKENS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)"
)
# scheme://user:password@host -> scheme://user:[redacted]@host
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")


def _secret_values() -> list[str]:
    values = {value for name, value in os.environ.items() if SECRET_NAME.search(name) and len(value) >= _MIN_SECRET}
    return sorted(values, key=len, reverse=True)  # longest first: a value containing another goes whole


def text(value: str, secrets: list[str] | None = None) -> str:
    for secret in _secret_values() if secrets is None else secrets:
        value = value.replace(secret, MARK)
    value = _USERINFO.sub(lambda m: m.group("head") + MARK + "@", value)
    return _TOKENS.sub(MARK, value)


def file_tail(path, keep: int) -> tuple[str, int]:
    """The last `keep` characters of a file's text, redacted, and how many bytes before them were left out.
    The redaction reads well before the cut, so no secret is split by it and half of one shown."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(size - 4 * keep, 0))
        redacted = text(f.read().decode(errors="replace"))
    return (redacted, 0) if size <= keep else (redacted[-keep:], size - keep)


def tree(value):
    """Every string in a JSON-like structure (dicts, lists, strings), keys included, redacted."""
    secrets = _secret_values()

    def walk(item):
        if isinstance(item, str):
            return text(item, secrets)
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)


def fingerprinted(value):
    """A JSON-like structure with every string that holds a secret replaced by its sha256, for what
    must still tell two secrets apart (a cache key) without writing either down."""
    import hashlib

    secrets = _secret_values()

    def walk(item):
        if isinstance(item, str):
            return item if text(item, secrets) == item else "sha256:" + hashlib.sha256(item.encode()).hexdigest()
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return [walk(v) for v in item]
        return item

    return walk(value)
