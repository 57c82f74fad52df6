"""The supplier's client: every call ends within its timeout, with a receipt or an error.

``SupplierUnavailable`` means no usable answer (the order may or may not exist: look it up
later); ``SupplierRefused`` means the supplier answered and refused the request.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

from lucyshop import validate
from lucyshop.proposal import canonical, validate_operation

MAX_REPLY_BYTES = 1024 * 1024
RECEIPT_FIELDS = {"operation", "status", "supplier", "order_number", "amount_cents", "reason"}


class SupplierUnavailable(ConnectionError):
    """No usable answer: the order may or may not exist, so the caller must look it up later."""


class SupplierRefused(ValueError):
    """The supplier answered and refused the request; sending it again will not change that."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"supplier refused the request with {status}: {error}")
        self.status = status
        self.error = error


def _receipt(data: Any, operation: str, identity: str) -> dict[str, Any]:
    """The data if it is this supplier's receipt for this operation, else SupplierUnavailable."""
    ok = (
        isinstance(data, dict)
        and set(data) == RECEIPT_FIELDS
        and data["operation"] == operation
        and data["status"] in ("ACCEPTED", "REJECTED")
        and data["supplier"] == identity
        and all(type(data[k]) is int and data[k] >= 0 for k in ("order_number", "amount_cents"))
        and (data["reason"] is None or isinstance(data["reason"], str))
    )
    if not ok:
        raise SupplierUnavailable(
            f"garbage reply from {identity}: not its receipt for {operation}: {data!r:.200}"
        )
    return data


class SupplierClient:
    """Talks to one supplier; every call ends within about ``timeout`` seconds or raises.

    One connection per request, so a dropped connection never poisons the next call. The
    identity is the caller's statement of which supplier this is, so a client for a dead
    supplier still knows its name, and a receipt signed by another supplier is refused.
    """

    def __init__(self, endpoint: str, *, identity: str, timeout: float = 1.0) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"a supplier endpoint is http://host:port, not {endpoint!r}")
        validate.label(identity, "a supplier identity")
        timeout = validate.seconds(timeout, "a supplier timeout", positive=True)
        self.endpoint = endpoint
        self.identity = identity
        self.timeout = float(timeout)
        self._host, self._port = parts.hostname, parts.port

    def __repr__(self) -> str:
        return (
            f"SupplierClient({self.endpoint!r}, identity={self.identity!r}, timeout={self.timeout})"
        )

    def _request(self, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
        """Status and parsed JSON; SupplierUnavailable for anything that is not a JSON answer.

        One deadline of ``timeout`` seconds bounds the connect, the sending, the wait for the
        reply and the reading of its body together.
        """
        what = f"{method} {path} to {self.identity} at {self.endpoint}"
        deadline = time.monotonic() + self.timeout

        def left() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete reply within {self.timeout}s")
            return remaining

        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            connection.connect()
            sock = connection.sock  # kept: getresponse() may hand the socket to the response
            sock.settimeout(left())
            connection.request(method, path, body=body, headers=headers)
            sock.settimeout(left())
            response = connection.getresponse()
            raw = b""
            while len(raw) <= MAX_REPLY_BYTES:
                sock.settimeout(left())
                if not (chunk := response.read1(65536)):
                    break
                raw += chunk
        except (OSError, http.client.HTTPException) as exc:
            raise SupplierUnavailable(f"{what} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()
        status = response.status
        if status >= 500:
            raise SupplierUnavailable(f"{what} failed with {status}: {raw[:200]!r}")
        if len(raw) > MAX_REPLY_BYTES:
            raise SupplierUnavailable(f"garbage reply to {what}: over {MAX_REPLY_BYTES} bytes")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise SupplierUnavailable(
                f"garbage reply to {what} ({status}): {raw[:200]!r}"
            ) from None
        if status in (400, 409, 411, 413):
            error = data.get("error") if isinstance(data, dict) else None
            raise SupplierRefused(status, str(error if error is not None else data))
        return status, data

    def health(self) -> dict[str, Any]:
        status, data = self._request("GET", "/health")
        if status != 200 or not isinstance(data, dict) or data.get("status") != "ok":
            raise SupplierUnavailable(
                f"{self.identity} at {self.endpoint} is not healthy: {data!r:.200}"
            )
        return data

    def lookup(self, operation: str) -> dict[str, Any] | None:
        """The supplier's receipt for ``operation``, or None if it has never seen it."""
        validate_operation(operation)
        status, data = self._request("GET", f"/orders/{operation}")
        if status == 404 and isinstance(data, dict) and data.get("error") == "unknown operation":
            return None
        if status != 200:
            raise SupplierUnavailable(f"lookup of {operation} got {status}: {data!r:.200}")
        return _receipt(data, operation, self.identity)

    def order(self, operation: str, proposal: dict[str, Any]) -> dict[str, Any]:
        """Send the order (safe to repeat with the same operation) and return its receipt."""
        body = canonical(proposal)
        validate_operation(operation)
        status, data = self._request("POST", f"/orders/{operation}", body)
        if status != 200:
            raise SupplierUnavailable(f"order {operation} got {status}: {data!r:.200}")
        return _receipt(data, operation, self.identity)

    def set_faults(self, **faults: float) -> dict[str, Any]:
        """Change the supplier's fault switches (experiments only); returns the new settings."""
        status, data = self._request("PUT", "/faults", json.dumps(faults))
        if status != 200 or not isinstance(data, dict):
            raise SupplierUnavailable(f"setting faults got {status}: {data!r:.200}")
        return data
