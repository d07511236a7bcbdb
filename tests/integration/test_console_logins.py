"""Console sign-ins over real HTTP against a real gateway process: failed ones are limited per client (429
with ``Retry-After``, whatever token comes next), and the session cookie is not the token. The gateway is
this module's own: the limit it puts on this machine's address would stop other modules' sign-ins."""

from __future__ import annotations

import httpx

from tms_hbase_gateway.auth import hash_token, new_token
from tms_hbase_gateway.console.logins import MAX_FAILURES

from ..gateway_server import GatewayProcess, module_gateway

TOKEN = new_token()
gateway = module_gateway(f'[[tokens]]\nname = "ops"\nsha256 = "{hash_token(TOKEN)}"\n')


def test_repeated_wrong_sign_ins_are_refused_for_a_while(gateway: GatewayProcess) -> None:
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        signed_in = http.post("/console/login", json={"token": TOKEN})
        assert signed_in.status_code == 200 and TOKEN not in signed_in.headers["set-cookie"]
        answers = [http.post("/console/login", json={"token": new_token()}) for _ in range(MAX_FAILURES)]
        assert [a.status_code for a in answers] == [401] * MAX_FAILURES
        limited = http.post("/console/login", json={"token": new_token()})
        assert limited.status_code == 429 and 1 <= int(limited.headers["Retry-After"]) <= 60
        assert "too many failed sign-ins" in limited.text
        # while limited, not even the right token is looked at; a session from before still works
        assert http.post("/console/login", json={"token": TOKEN}).status_code == 429
        assert http.get("/console/api/session").json()["principal"] == "ops"
    assert "error=TooManyFailedLogins" in gateway.log()
