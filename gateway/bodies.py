"""Reading request bodies under a byte limit, and the few query parameters the endpoints take."""

from __future__ import annotations

from typing import TypeVar

from starlette.requests import Request

from tms_hbase.errors import BatchTooLarge, InvalidArgument

N = TypeVar("N", int, float)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with BatchTooLarge (413) as soon as it is known to pass ``limit`` bytes:
    from ``Content-Length`` before reading anything, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BatchTooLarge(f"request body of {declared} bytes is over the gateway's limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BatchTooLarge(f"request body is over the gateway's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def query_number(request: Request, name: str, kind: type[N]) -> N | None:
    """An optional numeric query parameter; InvalidArgument if it does not parse."""
    text = _query(request, name)
    if text is None:
        return None
    what = "an integer" if kind is int else "a number"
    try:
        value = kind(text)
    except ValueError:
        raise InvalidArgument(f"query parameter {name}={text!r} is not {what}") from None
    if not -(2**63) <= value < 2**63:  # also NaN for a float; larger would overflow further down (a 500)
        raise InvalidArgument(f"query parameter {name}={text!r} is out of range")
    return value


def query_flag(request: Request, name: str) -> bool:
    """An optional true/false query parameter (absent: false)."""
    text = _query(request, name)
    text = "false" if text is None else text.lower()
    if text not in ("true", "false", "1", "0"):
        raise InvalidArgument(f"query parameter {name}={text!r}: expected true or false")
    return text in ("true", "1")


def _query(request: Request, name: str) -> str | None:
    # most calls have no query string: then nothing is parsed
    return request.query_params.get(name) if request.scope.get("query_string") else None
