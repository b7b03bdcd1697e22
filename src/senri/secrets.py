"""One scrubber for secrets: API keys never reach an error, a trace, a log or a table.

A server or proxy in front of a model may echo the request's headers in an error body ("401: invalid
header Authorization: Bearer sk-…"); that body becomes a prediction's ``error`` and a log line. Every path
that records text from a backend passes it through :func:`scrub` first: the values registered with
:func:`register` (the key read from ``api_key_env``) are replaced wherever they occur, and so is whatever
follows ``Authorization:``, ``api-key:``/``x-api-key:`` or ``Bearer`` (a key we were never told about, e.g.
a proxy's own). :func:`scrub_logs` installs the same replacement on the root log handlers, so tracebacks and
warnings are covered too.
"""

from __future__ import annotations

import logging
import re
import threading

REDACTED = "[redacted]"
#: Shorter values are not treated as secrets: replacing "a" everywhere would garble every message.
MIN_SECRET_LENGTH = 6

_lock = threading.Lock()
_secrets: set[str] = set()

# A header name followed by its value (to the end of the line, a quote, or a comma/brace of JSON), and a
# bare bearer token.
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|(?:x-)?api[-_]key)(\s*[:=]\s*|\"\s*:\s*\"|'\s*:\s*')([^\r\n\"',}]+)")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")


def register(value: str | None) -> None:
    """Treat ``value`` (an API key) as secret from now on, in this process."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(value)


def scrub(text: str | None) -> str | None:
    """``text`` with every registered secret and every auth header value replaced by ``[redacted]``."""
    if not text:
        return text
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, REDACTED)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


class ScrubbingFilter(logging.Filter):
    """Rewrites each record's message (arguments merged in) and traceback text through :func:`scrub`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logged as it is
            return True
        record.msg, record.args = scrub(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


def scrub_logs(logger: logging.Logger | None = None) -> None:
    """Install :class:`ScrubbingFilter` on every handler of ``logger`` (default: the root logger), once, and
    scrub the traceback of an exception nobody caught (it goes to stderr, i.e. the job's log file)."""
    import sys
    import traceback

    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter())
    if not getattr(sys.excepthook, "scrubs", False):
        def excepthook(kind, value, tb):  # noqa: ANN001
            sys.stderr.write(scrub("".join(traceback.format_exception(kind, value, tb))) or "")

        excepthook.scrubs = True  # type: ignore[attr-defined]
        sys.excepthook = excepthook
