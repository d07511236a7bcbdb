"""Bytes shown to people: a message's payload, key and headers as text where they are printable, as hex
otherwise, in one form for every command that shows messages (topic tail, sub consume)."""

from __future__ import annotations

from tms_hbase.model.record import Headers


def text(data: bytes) -> str | None:
    """``data`` as text if it is printable UTF-8 (tabs allowed), else None."""
    try:
        decoded = data.decode()
    except UnicodeDecodeError:
        return None
    return decoded if decoded.replace("\t", " ").isprintable() else None


def shown(data: bytes) -> str:
    """Bytes for a line of text: escaped text if printable UTF-8, else ``hex:`` and their hex digits."""
    decoded = text(data)
    return repr(decoded)[1:-1] if decoded is not None else "hex:" + data.hex()


def key_and_headers(key: bytes | None, headers: Headers) -> dict:
    """A message's key and headers for --json: as text (None if not printable) and their exact bytes in hex."""
    return {
        "key": None if key is None else text(key),
        "key_hex": None if key is None else key.hex(),
        "headers": [{"name": n, "value": text(v), "value_hex": v.hex()} for n, v in headers],
    }


def key_and_headers_text(key: bytes | None, headers: Headers) -> str:
    """A message's key and headers in a line of text: ``key=K  name=value  `` (empty when it has neither)."""
    shown_key = "" if key is None else f"key={shown(key)}  "
    return shown_key + "".join(f"{name}={shown(value)}  " for name, value in headers)
