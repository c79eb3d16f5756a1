"""The checks of what the client is given, before any byte is made: subjects
(with a bounded cache of those checked), queue groups, payloads, header names and
values, subscription ids. Each raises ``TypeError`` or ``ValueError`` saying what
was wrong. No I/O."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["check_subject"]

_BAD_SUBJECT_CHARS = re.compile(r"[\s]")


def check_subject(subject: object, *, what: str = "subject", wildcards: bool = False) -> str:
    """``subject`` if it is a valid NATS subject: a str of dot-separated tokens,
    none empty, with no whitespace; wildcards (``*`` a whole token, ``>`` the last
    token) only if ``wildcards``.

    Raises:
        TypeError: not a str.
        ValueError: not a valid subject (the message says why).
    """
    if not isinstance(subject, str):
        raise TypeError(f"{what} must be a str, got {subject!r}")
    if not subject:
        raise ValueError(f"{what} must not be empty")
    if _BAD_SUBJECT_CHARS.search(subject):
        raise ValueError(f"{what} must not contain whitespace, got {subject!r}")
    tokens = subject.split(".")
    for index, token in enumerate(tokens):
        if not token:
            raise ValueError(f"{what} {subject!r} has an empty token (two dots, or one at an end)")
        if "*" in token or ">" in token:
            if not wildcards:
                raise ValueError(
                    f"{what} {subject!r} has a wildcard ('*' or '>'): only subscriptions may"
                )
            if token not in ("*", ">") or (token == ">" and index != len(tokens) - 1):
                raise ValueError(
                    f"{what} {subject!r}: '*' must be a whole token and '>' the whole last one"
                )
    return subject


_CHECKED_SUBJECTS: dict[str, None] = {}
"""Subjects :meth:`ClientProtocol.publish` has checked, and the prefixes (all
tokens but the last) of those whose last token is a number: they do not depend on
the connection. Bounded: emptied when it reaches :data:`_CHECKED_SUBJECTS_MAX`."""
_CHECKED_SUBJECTS_MAX: Final = 4096


def _check_published_subject(subject: object, what: str) -> None:
    if type(subject) is str:  # (anything else: check_subject says what is wrong)
        if subject in _CHECKED_SUBJECTS:  # (the hot path: a subject published before)
            return
        # Reply subjects of requests are each new, a number after a fixed prefix
        # (``_INBOX.<id>.<n>``): a checked prefix and digits make a valid subject.
        prefix, dot, last = subject.rpartition(".")
        if dot and last.isdigit() and last.isascii() and prefix in _CHECKED_SUBJECTS:
            return
    checked = check_subject(subject, what=what)
    if len(_CHECKED_SUBJECTS) >= _CHECKED_SUBJECTS_MAX:
        _CHECKED_SUBJECTS.clear()
    prefix, dot, last = checked.rpartition(".")
    if dot and last.isdigit():
        _CHECKED_SUBJECTS[prefix] = None  # (a valid subject's prefix is one too)
    else:
        _CHECKED_SUBJECTS[checked] = None


def _check_queue(queue: object) -> str:
    if not isinstance(queue, str):
        raise TypeError(f"queue must be a str or None, got {queue!r}")
    if not queue or _BAD_SUBJECT_CHARS.search(queue):
        raise ValueError(f"queue must be a non-empty name without whitespace, got {queue!r}")
    return queue


def _payload(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"a payload must be bytes, got {type(data).__name__}")


def _check_sid(sid: object) -> None:
    if isinstance(sid, bool) or not isinstance(sid, int) or sid < 1:
        raise ValueError(f"a subscription id must be a positive int, got {sid!r}")


_HEADER_NAME = re.compile(r"[!-9;-~]+")  # printable ASCII but ':' (RFC 7230 token-ish)


def _check_header(name: object, value: object) -> None:
    if not isinstance(name, str) or not isinstance(value, str):
        raise TypeError(f"a header's name and value must be str, got {name!r}: {value!r}")
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"header name {name!r} must be printable ASCII without ':' or spaces")
    if "\r" in value or "\n" in value:
        raise ValueError(f"header {name!r}'s value must not contain CR or LF, got {value!r}")
