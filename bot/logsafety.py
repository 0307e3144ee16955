"""Secrets never reach a log line (SEC-4).

``install_redaction(handler)`` puts a ``RedactSecrets`` filter on a handler. The filter formats each record's
message itself (``msg % args``), runs it through ``memory.safety.redact_secrets`` and stores the result back
as a message without arguments, so every formatter after it sees only redacted text. Exception and stack text
are formatted and redacted the same way: an HTTP client's error message carries the URL, and a Telegram
Bot API URL carries the bot token.

The filter goes on handlers, not loggers: a logger's filters do not see records propagated from its
children, a handler's filters see every record it is about to write.
"""

from __future__ import annotations

import logging

from memory import redact_secrets

_FORMATTER = logging.Formatter()


class RedactSecrets(logging.Filter):
    """Rewrites each record's message, exception and stack text with secrets replaced by ``[redacted]``."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact_secrets(_message(record)), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = _FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
            # Formatters print exc_text when it is set; dropping exc_info stops handlers that render the live
            # exception themselves (rich tracebacks, with their locals) from printing the unredacted one.
            record.exc_info = None
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


def install_redaction(handler: logging.Handler) -> None:
    """Put a ``RedactSecrets`` filter on ``handler``; calling it again on the same handler adds nothing."""
    if not any(isinstance(f, RedactSecrets) for f in handler.filters):
        handler.addFilter(RedactSecrets())


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # noqa: BLE001 - a bad format string or an argument whose __str__ fails: any error
        # Left alone, logging would print the format and its arguments raw to stderr (Handler.handleError);
        # instead the pieces are joined and redacted, and the logging call does not raise.
        return f"{_text(record.msg)} {_text(record.args)}"


def _text(value: object) -> str:
    try:
        return value if isinstance(value, str) else repr(value)
    except Exception:  # noqa: BLE001 - the object's own __repr__ failed; object's cannot
        return object.__repr__(value)
