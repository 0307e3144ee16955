"""How log records look on stderr (OPS-4): for a person at a terminal, or one line a record for a machine.

    auto   rich at a terminal; elsewhere (journald, ``docker logs``, a pipe) plain one-line records
    text   plain one-line records, even at a terminal
    json   one JSON object a line: time (ISO 8601, UTC), level, logger, message, and exception when there is one

Rich wraps a record to the terminal's width; with no terminal it assumed 80 columns and a container's or
journald's log showed one record over several lines, which no log tool can put back together. A traceback keeps
its newlines escaped (``\\n``) in plain records, so a record is still one line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLine(logging.Formatter):
    """The usual plain format, with every newline of the message or traceback escaped."""

    def __init__(self) -> None:
        super().__init__(PLAIN)

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\r", "\\r").replace("\n", "\\n")


class JsonLines(logging.Formatter):
    """One JSON object per record; never the record's arguments apart (they are in the message, redacted)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def stderr_handler(log_format: str) -> logging.Handler:
    """The handler for stderr in ``log_format`` (``auto`` decides by whether stderr is a terminal)."""
    if log_format == "auto" and sys.stderr.isatty():
        from rich.logging import RichHandler

        from .output import err

        return RichHandler(console=err(), show_path=False, rich_tracebacks=False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else OneLine())
    return handler
