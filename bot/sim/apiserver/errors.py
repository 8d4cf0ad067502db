"""Errors the simulated API server answers with, each rendered as a Kubernetes `Status` object.

`ApiError(code, reason, message, details)` is raised anywhere below the HTTP layer; the server
turns it into the JSON a real API server sends (`kind: Status`, `status: Failure`, the reason
kubectl and the Python client switch on). The helpers name the common cases.
"""

from __future__ import annotations

import json
from typing import Any


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        #: A continue token carried in the Status's list metadata (410 on an expired continue token).
        self.list_continue = ""
        self.retry_after: int | None = None

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
        if self.list_continue:
            body["metadata"] = {"continue": self.list_continue}
        body.update(status="Failure", message=self.message, reason=self.reason)
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def body(self) -> bytes:
        return json.dumps(self.status(), separators=(",", ":")).encode()


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', _details(name, group, resource))


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', _details(name, group, resource)
    )


def conflict(resource: str, name: str, group: str = "", why: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        _details(name, group, resource),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, name: str, group: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; causes are (field, reason, message) like field.ErrorList."""
    text = "; ".join(f"{f}: {m}" for f, _, m in causes)
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for f, r, m in causes]
    return ApiError(
        422, "Invalid", f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}', details
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def too_many_requests(message: str, causes: list[dict[str, str]] | None = None) -> ApiError:
    return ApiError(429, "TooManyRequests", message, {"causes": causes} if causes else None)


def internal(message: str) -> ApiError:
    return ApiError(
        500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]}
    )
