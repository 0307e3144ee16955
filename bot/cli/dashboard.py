"""``companion dashboard``: the web page and JSON API over the store (DASH-1..3), without the chat platforms.

Safe by default: it listens on 127.0.0.1, and it does not start without a long COMPANION_DASHBOARD_TOKEN, nor on
another address unless COMPANION_DASHBOARD_ALLOW_REMOTE=true (``bot.dashboard.startup``). Inside ``companion run``
the same dashboard runs on the bot's own store and memory thread when COMPANION_DASHBOARD_ENABLED=true
(``bot.composition``).
aiohttp and the store are imported by the handler, so ``companion --help`` does not pay for them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING

from ..dashboard.startup import is_loopback, start_refusal
from .output import UsageError, note

if TYPE_CHECKING:
    from ..config import Settings

EPILOG = """\
Every request needs the token: `Authorization: Bearer $COMPANION_DASHBOARD_TOKEN`, or the login form at
/login (it sets an HttpOnly, SameSite=Strict cookie). Every change made here is written to an audit trail
(GET /api/audit). To reach it from another machine, keep the default host and use an SSH tunnel
(ssh -L 8765:127.0.0.1:8765 host) rather than --host 0.0.0.0."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dashboard",
        help="serve the dashboard: a web page and JSON API to see, search, fix and forget memories",
        description="Serve the dashboard: a web page and JSON API to see, search, fix and forget what the bot remembers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--host",
        default=None,
        help="the address to listen on (default: COMPANION_DASHBOARD_HOST, else 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        type=port_number,
        default=None,
        help="the port (default: COMPANION_DASHBOARD_PORT, else 8765)",
    )
    p.set_defaults(handler=dashboard)


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {value}")
    return value


def dashboard(args: argparse.Namespace, settings: Settings) -> int:
    from ..clients import secret

    token = secret(settings.dashboard_token)
    host = args.host or settings.dashboard_host
    port = settings.dashboard_port if args.port is None else args.port
    problem = start_refusal(token, host, allow_remote=settings.dashboard_allow_remote)
    if problem:
        raise UsageError(problem)
    if not is_loopback(host):
        note(
            f"warning: listening on {host}: anyone who can reach this machine can try the token; prefer an SSH tunnel"
        )
    return asyncio.run(_serve(settings, host, port, token, token_source(args)))


def token_source(args: argparse.Namespace) -> str:
    """Where the person finds the token to paste at the login form: named once at start, never the token itself
    (it would sit in the scrollback and in any log the terminal is captured to)."""
    import os

    if any(name.upper() == "COMPANION_DASHBOARD_TOKEN" for name in os.environ):
        return "COMPANION_DASHBOARD_TOKEN in the environment"
    home = getattr(args, "home", None)
    where = home.env_file if home is not None and home.env_file is not None else "your config file"
    return f"COMPANION_DASHBOARD_TOKEN in {where}"


async def _serve(settings: Settings, host: str, port: int, token: str, source: str) -> int:
    from ..composition import build_runtime, public_hosts
    from ..dashboard.app import DashboardServer, create_app
    from ..dashboard.services import DashboardServices

    # not started: no extraction or scheduler, only the store and its memory thread (and no second dashboard)
    runtime = build_runtime(settings.model_copy(update={"dashboard_enabled": False}))
    app = create_app(
        DashboardServices.of(
            runtime.engine,
            runtime.runner,
            runtime.orchestrator,
            runtime.budgets.limits if runtime.budgets else None,
        ),
        token=token,
        public_hosts=public_hosts(settings),
    )
    server = DashboardServer(app, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        note(
            f"dashboard on http://{host}:{server.port}/ (Ctrl-C stops); log in with the token: {source}"
        )
        await stop.wait()
    finally:
        await server.stop()
        await runtime.runner.run(runtime.engine.close)
        runtime.runner.shutdown()
    return 0
