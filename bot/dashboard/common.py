"""What every route shares: its services, its caller, body parsing, JSON answers, errors and the audit trail."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from .auth import Caller, Gate
from .services import DashboardServices

M = TypeVar("M", bound=BaseModel)
SERVICES = web.AppKey("services", DashboardServices)
GATE = web.AppKey("gate", Gate)
# public host names the Host header may carry besides loopback ones
HOSTS = web.AppKey("hosts", frozenset)
CALLER = web.RequestKey("caller", Caller)


class ApiError(Exception):
    """An answer other than 2xx, as ``{"error": message, "detail": detail}``."""

    def __init__(self, status: int, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.status, self.message, self.detail = status, message, detail


def services(request: web.Request) -> DashboardServices:
    return request.app[SERVICES]


def caller(request: web.Request) -> Caller:
    return request[CALLER]


def answer(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda v: json.dumps(v, ensure_ascii=False))


def error(status: int, message: str, detail: Any = None) -> web.Response:
    body: dict[str, Any] = {"error": message}
    if detail is not None:
        body["detail"] = detail
    return answer(body, status)


async def body(request: web.Request, model: type[M]) -> M:
    """The JSON body as ``model``; 400 naming the problem when it is not JSON or not that shape
    (413 from aiohttp when it is larger than the app's ``client_max_size``)."""
    raw = await request.read()
    try:
        data = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError(400, _first(exc), validation_detail(exc)) from None


def validation_detail(exc: ValidationError) -> list[dict[str, Any]]:
    return [
        {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]} for e in exc.errors()
    ]


def _first(exc: ValidationError) -> str:
    """A sentence a person reads in the page: "The importance should be at most 10", not "invalid body: importance:
    Input should be less than or equal to 10" (the field-by-field detail still goes with it, for scripts)."""
    e = exc.errors()[0]
    where = " ".join(
        str(p).replace("_", " ")
        for p in e["loc"]
        if not isinstance(p, int) and str(p) not in _TYPE_NAMES
    )
    msg = str(e["msg"])
    for said, plain in _PLAIN.items():
        msg = msg.replace(said, plain)
    msg = msg.removeprefix("Input ").removeprefix("Value error, ")
    return f"The {where} {msg}" if where else msg[:1].upper() + msg[1:]


# pydantic names a union's member in the place
_TYPE_NAMES = frozenset({"int", "float", "str", "bool", "list[str]"})
_PLAIN = {
    "less than or equal to": "at most",
    "greater than or equal to": "at least",
    "a valid number, unable to parse string as a number": "a number",
    "a valid integer, unable to parse string as an integer": "a number",
    "a valid integer": "a number",
    "a valid number": "a number",
}


async def audit_action(
    request: web.Request,
    action: str,
    target: str = "",
    *,
    person_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """One audit row for a change this request made (ids, fields and counts only: never a memory's words)."""
    svc = services(request)
    who = caller(request).who
    await svc.memory.dashboard.record(who, action, target, person_id, detail)
