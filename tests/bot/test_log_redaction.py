"""SEC-4: secrets never reach a log line. Real loggers and handlers writing to a StringIO; fake secrets."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import Iterator

import pytest
from rich.console import Console
from rich.logging import RichHandler

from bot.logsafety import RedactSecrets, install_redaction

STRIPE_KEY = "sk_live_" + "a1B2" * 6  # fake, the shape of a Stripe live secret key
TELEGRAM = "123456789:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"  # fake, the shape of a bot token
R = "[redacted]"


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A fresh logger whose only handlers are the ones the test adds."""
    log = logging.getLogger(f"test.logsafety.{uuid.uuid4().hex}")
    log.setLevel(logging.DEBUG)
    log.propagate = False  # the records reach only the handlers the test adds
    yield log
    for handler in list(log.handlers):
        log.removeHandler(handler)


def own_handler(logger: logging.Logger, handler: logging.Handler) -> None:
    # pytest 9 also hangs its capture handlers on every non-propagating logger at the start of the call phase,
    # ahead of ours; they would format (and choke on) the record before our filter ran, so they go.
    for other in list(logger.handlers):
        logger.removeHandler(other)
    install_redaction(handler)
    logger.addHandler(handler)


def stream_handler(logger: logging.Logger) -> io.StringIO:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    own_handler(logger, handler)
    return out


def test_a_key_passed_as_an_argument_and_a_password_in_prose_are_redacted(logger):
    out = stream_handler(logger)
    logger.info("charging %s with key %s", "alice", STRIPE_KEY)
    logger.warning("user said: my password is hunter2, see you at 5")
    text = out.getvalue()
    assert STRIPE_KEY not in text and "a1B2a1B2" not in text and "hunter2" not in text
    assert f"INFO {logger.name}: charging alice with key {R}\n" in text
    assert f"WARNING {logger.name}: user said: my password is {R}, see you at 5\n" in text


def test_a_bot_token_inside_an_http_client_log_line_is_redacted(logger):
    out = stream_handler(logger)
    # The line httpx writes for every Telegram Bot API call.
    logger.info(
        'HTTP Request: %s %s "%s %d %s"',
        "POST",
        f"https://api.telegram.org/bot{TELEGRAM}/getUpdates",
        "HTTP/1.1",
        200,
        "OK",
    )
    assert TELEGRAM.split(":")[1] not in out.getvalue()
    assert (
        f'HTTP Request: POST https://api.telegram.org/bot{R}/getUpdates "HTTP/1.1 200 OK"'
        in out.getvalue()
    )


def test_records_from_child_loggers_are_redacted_by_the_parent_handler(logger):
    out = stream_handler(logger)
    logging.getLogger(f"{logger.name}.child").error("key=%s", STRIPE_KEY)
    assert STRIPE_KEY not in out.getvalue() and f"key={R}" in out.getvalue()


def test_exception_text_is_redacted_and_the_traceback_kept(logger):
    out = stream_handler(logger)
    try:
        raise ValueError(f"card declined for key {STRIPE_KEY}")
    except ValueError:
        logger.exception("payment failed")
    text = out.getvalue()
    assert STRIPE_KEY not in text
    assert "payment failed" in text and "Traceback (most recent call last)" in text
    assert f"ValueError: card declined for key {R}" in text


def test_rich_tracebacks_do_not_print_the_unredacted_exception(logger):
    out = io.StringIO()
    own_handler(
        logger,
        RichHandler(console=Console(file=out, width=200), rich_tracebacks=True, show_path=False),
    )
    try:
        raise RuntimeError(f"upstream said {STRIPE_KEY}")
    except RuntimeError:
        logger.exception("call failed")
    assert STRIPE_KEY not in out.getvalue() and "call failed" in out.getvalue()


def test_a_format_string_that_does_not_fit_its_arguments_never_raises_nor_leaks(logger, capsys):
    out = stream_handler(logger)
    logger.info("two slots %s %s, one argument", STRIPE_KEY)
    assert STRIPE_KEY not in out.getvalue() + capsys.readouterr().err
    assert "two slots" in out.getvalue()


def test_a_message_with_a_percent_sign_survives_redaction(logger):
    out = stream_handler(logger)
    logger.info("%d%% done, token: %s", 50, "tok3n" * 4)
    assert f"50% done, token: {R}" in out.getvalue()


def test_the_record_is_left_with_the_redacted_message_and_no_arguments():
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "password: %s (%d tries)", ("hunter2", 3), None
    )
    assert RedactSecrets().filter(record) is True
    assert (record.msg, record.args) == (f"password: {R} (3 tries)", ())


def test_installing_twice_adds_one_filter():
    handler = logging.StreamHandler(io.StringIO())
    install_redaction(handler)
    install_redaction(handler)
    assert sum(isinstance(f, RedactSecrets) for f in handler.filters) == 1


def test_debug_logging_keeps_chat_libraries_from_logging_message_texts():
    """Trust F15: at DEBUG python-telegram-bot logs each update's text; those libraries stay at INFO."""
    from bot.cli.main import CHATTY_LIBRARIES, _remove_handlers, _setup_logging

    _setup_logging("DEBUG")
    try:
        assert logging.getLogger().level == logging.DEBUG
        for name in CHATTY_LIBRARIES:
            assert not logging.getLogger(name).isEnabledFor(logging.DEBUG), name
        assert logging.getLogger("bot.orchestrator").isEnabledFor(logging.DEBUG)
    finally:
        _remove_handlers()
        for name in CHATTY_LIBRARIES:
            logging.getLogger(name).setLevel(logging.NOTSET)
