"""The console's overview says in plain words why the transaction server does not answer: the reason, not
the repr of a Thrift exception."""

from __future__ import annotations

import socket

import pytest

from tms_hbase.config import TX_ENV
from tms_hbase_gateway.console.views import tx_server_status


def test_an_unreachable_transaction_server_is_said_in_plain_words(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv(TX_ENV, f"127.0.0.1:{port}")
    status = tx_server_status()
    assert status["reachable"] is False
    assert status["error"].startswith(f"transaction server at 127.0.0.1:{port} failed or did not answer")
    assert "Could not connect to" in status["error"]
    assert "Exception" not in status["error"] and "type=" not in status["error"]
