"""The dashboard server (DASH-1, DASH-3): ``create_app`` wires the routes, ``serve_dashboard``
binds them.

Request path: security headers on every answer -> errors to JSON -> the Host header (loopback names, or a
configured public host: a page on another site whose name was re-pointed at 127.0.0.1, DNS rebinding,
sends its own name and is refused) -> auth (bearer or session cookie, CSRF for a cookie's writes; wrong
tokens throttled per client) -> the route. Only the login form and the static files answer without a
token. Bodies above ``MAX_BODY`` are refused (413) before any route reads them.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from pydantic import ValidationError

from memory import InvalidInput, NotFound, NotYours

from . import admin, manners, memories, people, persona, usage
from .auth import (
    CLIENT_COOKIE,
    CLIENT_TTL_S,
    COOKIE,
    CSRF_HEADER,
    SAFE_METHODS,
    SESSION_TTL_S,
    Caller,
    Gate,
    client_key,
)
from .common import CALLER, GATE, HOSTS, SERVICES, ApiError, answer, error, validation_detail
from .services import DashboardServices
from .startup import is_loopback

log = logging.getLogger(__name__)
STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 256 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'",
}


def create_app(
    services: DashboardServices, *, token: str, public_hosts: tuple[str, ...] = ()
) -> web.Application:
    """The dashboard for ``services``; ``token`` is required (``ValueError`` when empty). Requests must name a
    loopback host or one of ``public_hosts`` in their Host header."""
    app = web.Application(middlewares=[_errors, _host, _auth], client_max_size=MAX_BODY)
    app[SERVICES] = services
    app[GATE] = Gate(token)
    app[HOSTS] = frozenset(h.strip().lower().rstrip(".") for h in public_hosts if h.strip())
    app.on_response_prepare.append(_headers)
    app.router.add_get("/", index)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/static/{name:.+}", static)
    app.router.add_get("/favicon.ico", favicon)
    app.router.add_get("/api/session", session)
    memories.register(app.router)
    people.register(app.router)
    admin.register(app.router)
    persona.register(app.router)
    manners.register(app.router)
    usage.register(app.router)
    return app


async def serve_dashboard(app: web.Application, host: str, port: int) -> web.AppRunner:
    """Listen on ``host:port`` (port 0: any free port, see ``runner.addresses``); ``await runner.cleanup()`` stops it."""
    # an access log would record query strings: people's words
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


class DashboardServer:
    """The dashboard bound to host:port, started and stopped with the bot (``Runtime``) or by ``companion dashboard``."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app, self.host, self.port = app, host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        self._runner = await serve_dashboard(self.app, self.host, self.port)
        # the port actually bound (port 0 asks for any free one)
        self.port = self._runner.addresses[0][1]
        log.info("dashboard on http://%s:%d (token required)", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


# -- middleware -----------------------------------------------------------------------------------------
async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes ``{"error": ...}`` with its status; a bug is logged and answered 500."""
    try:
        return await handler(request)
    except ApiError as exc:
        return error(exc.status, exc.message, exc.detail)
    except NotFound as exc:
        return error(404, str(exc))
    except NotYours as exc:
        return error(403, str(exc))
    except InvalidInput as exc:  # the store's rules (safety filters, bounds) refused the values
        return error(422, str(exc))
    except ValidationError as exc:  # recall knobs
        return error(400, "invalid settings", validation_detail(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error(exc.status, exc.reason)
    except Exception:  # the request edge: one failing request never stops the server
        log.exception("dashboard request failed: %s %s", request.method, request.path)
        return error(500, "internal error (see the server log)")


@web.middleware
async def _host(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Only a request that names this dashboard by a loopback name or a configured public host is served."""
    name = host_name(request.headers.get("Host", ""))
    if not (is_loopback(name) or name in request.app[HOSTS]):
        raise ApiError(
            421,
            "unknown Host header: use http://127.0.0.1:<port>/ (or set COMPANION_DASHBOARD_PUBLIC_HOST)",
        )
    return await handler(request)


def host_name(header: str) -> str:
    """The host of a Host header, lower-case, without its port or brackets ("[::1]:8765" -> "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0].rstrip(".") if header.count(":") == 1 else header.rstrip(".")


def _public(request: web.Request) -> bool:
    return request.path == "/login" or (
        request.method in SAFE_METHODS
        and (request.path.startswith("/static/") or request.path == "/favicon.ico")
    )


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    if _public(request):
        return await handler(request)
    gate = request.app[GATE]
    header = request.headers.get("Authorization")
    client = gate.client(request.cookies.get(CLIENT_COOKIE), client_key(request.remote))
    if header is not None and gate.throttled(client):
        raise ApiError(429, "too many wrong tokens from this client; wait a second")
    # A wrong Authorization header is refused even with a valid cookie: a script must not fall back to a browser's session.
    found = gate.bearer(header) if header is not None else gate.session(request.cookies.get(COOKIE))
    if found is None and header is not None:
        gate.failed(client)
    elif header is not None:
        gate.succeeded(client)
    if found is None:
        if request.path == "/" and header is None:
            return web.Response(status=303, headers={"Location": "/login"})
        raise ApiError(
            401,
            "authentication required: send Authorization: Bearer <COMPANION_DASHBOARD_TOKEN>, or log in at /login",
        )
    if request.method not in SAFE_METHODS and not gate.csrf_ok(found, await _csrf_offered(request)):
        raise ApiError(
            403,
            f"missing or wrong {CSRF_HEADER} header (a cookie session's changes need it; see GET /api/session)",
        )
    request[CALLER] = found
    return await handler(request)


async def _csrf_offered(request: web.Request) -> str | None:
    offered = request.headers.get(CSRF_HEADER)
    if (
        offered is None
        and request.path == "/logout"
        and request.content_type == "application/x-www-form-urlencoded"
    ):
        # a plain logout form posts it as a field
        offered = str((await request.post()).get("csrf") or "")
    return offered


# -- the page, the login form ------------------------------------------------------------------------------
async def index(request: web.Request) -> web.Response:
    page = STATIC / "index.html"
    if not page.is_file():
        raise ApiError(
            503, "the dashboard page is not installed (bot/dashboard/static/index.html is missing)"
        )
    csrf = html.escape(request[CALLER].csrf, quote=True)
    return web.Response(
        text=page.read_text(encoding="utf-8").replace("{{CSRF}}", csrf), content_type="text/html"
    )


async def static(request: web.Request) -> web.StreamResponse:
    path = (STATIC / request.match_info["name"]).resolve()
    if not path.is_relative_to(STATIC) or not path.is_file() or path.name == "index.html":
        raise web.HTTPNotFound()
    return web.FileResponse(path)


async def favicon(request: web.Request) -> web.StreamResponse:
    """Browsers ask for it on every page, before any login: an icon if the page ships one, else nothing (204)."""
    icon = STATIC / "favicon.ico"
    return web.FileResponse(icon) if icon.is_file() else web.Response(status=204)


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Companion dashboard: log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/static/app.css"></head>
<body class="login"><main><h1>Companion dashboard</h1>
<form method="post" action="/login"><label for="token">Dashboard token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Log in</button>{problem}</form>
<p class="hint">The token is the value of COMPANION_DASHBOARD_TOKEN where the dashboard runs.</p></main></body></html>
"""


def _login_page(problem: str = "", status: int = 200) -> web.Response:
    note = f'<p class="error" role="alert">{html.escape(problem)}</p>' if problem else ""
    return web.Response(
        text=LOGIN_PAGE.format(problem=note), content_type="text/html", status=status
    )


async def login_form(request: web.Request) -> web.Response:
    """The form; a browser without a valid client cookie gets one, always, so its wrong tokens
    are its own (issues 31 and 44)."""
    page, gate = _login_page(), request.app[GATE]
    if gate.client(request.cookies.get(CLIENT_COOKIE), "").key == "":
        _client_cookie(page, gate.new_client())
    return page


def _client_cookie(response: web.Response, value: str) -> None:
    response.set_cookie(
        CLIENT_COOKIE, value, httponly=True, samesite="Strict", path="/", max_age=int(CLIENT_TTL_S)
    )


async def login(request: web.Request) -> web.Response:
    gate = request.app[GATE]
    client = gate.client(request.cookies.get(CLIENT_COOKIE), client_key(request.remote))
    if gate.throttled(client):
        return _login_page("Too many wrong tokens; wait a second and try again.", 429)
    form = await request.post()
    cookie = gate.login(str(form.get("token") or ""), client)
    if cookie is None:
        return _login_page("That is not the dashboard token.", 401)
    response = web.Response(status=303, headers={"Location": "/"})
    response.set_cookie(
        COOKIE, cookie, httponly=True, samesite="Strict", path="/", max_age=int(SESSION_TTL_S)
    )
    if not client.proven:  # this browser has logged in: no crowd of fresh cookies slows it again
        _client_cookie(response, gate.new_client(proven=True))
    return response


async def logout(request: web.Request) -> web.Response:
    found: Caller = request[CALLER]
    request.app[GATE].logout(found)
    response = answer({"logged_out": True})
    response.del_cookie(COOKIE, path="/")
    return response


async def session(request: web.Request) -> web.Response:
    found: Caller = request[CALLER]
    return answer(
        {
            "csrf": found.csrf,
            "who": found.who,
            "via": found.via,
            "owners": list(request.app[SERVICES].owners),
        }
    )
