"""Benchmark: publish and fetch over Kerberized Thrift gateways (SASL/GSSAPI on the binary transport), by quality
of protection: auth-int (each message signed) and auth-conf (each message encrypted) against auth (authenticated
once, then plain Thrift). It runs on what the secured test group runs on (tests/secured_hbase.py): a KDC
(Apache Kerby's) and a local HBase of its own secured with it, with a stock ThriftServer JVM per quality of
protection, and measures as bench/transports.py does. The figures are stated, no goal. Not part of ``--quick``
(CI's ``make bench-quick``): starting a KDC and a second HBase takes minutes; run it with
``python -m bench.run --only transports-sasl``."""

from __future__ import annotations

import tempfile
from contextlib import ExitStack
from pathlib import Path

from tests.secured_hbase import secured_hbase_running
from tms_hbase import MessagingClient
from tms_hbase.config import Config, ThriftTransport
from tms_hbase_launcher.gateway import start_gateway
from tms_hbase_launcher.kdc import CLIENT, SERVER_HOST

from .common import Result, Settings, median, ratio
from .transports import BATCH, Sizes, gateway_jvm, measure

QOPS = ["auth", "auth-int", "auth-conf"]
BASELINE = "auth"


def run(settings: Settings) -> Result:
    sizes = Sizes.of(settings)
    flags, jit = gateway_jvm(settings)
    result = Result(
        "transports-sasl", f"Publish and fetch over SASL, by protection ({sizes.batches} batches of {BATCH} × 1 KiB)"
    )
    prefix = settings.prefix("sasl")
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sasl-")))
        secured = stack.enter_context(secured_hbase_running(folder))
        kdc = secured.kdc
        with MessagingClient(f"127.0.0.1:{secured.hbase.thrift_port}", prefix, timeout_seconds=60) as admin:
            admin.admin.init_tables()  # as HBase's superuser, through the secured HBase's own gateway
        clients = {}
        for qop in QOPS:
            gateway = start_gateway(kerberos=kdc, qop=qop, local=secured.hbase, java_flags=flags)
            stack.callback(gateway.stop)
            transport = ThriftTransport(
                kerberos=True, kerberos_qop=qop, keytab=str(kdc.client_keytab), principal=kdc.principal(CLIENT)
            )
            address = f"{SERVER_HOST}:{gateway.address.rsplit(':', 1)[1]}"  # the host its principal names
            config = Config((address,), prefix, timeout_seconds=60, transport=transport)
            clients[qop] = stack.enter_context(MessagingClient(config=config))
        publish, fetch = measure(clients, sizes, settings.rounds, "transports-sasl")
    rows = []
    for qop in QOPS:
        pub, got = median(publish[qop]), median(fetch[qop])
        pub_ratio, fetch_ratio = ratio(pub, median(publish[BASELINE])), ratio(got, median(fetch[BASELINE]))
        rows.append([qop, pub, f"{pub_ratio:.2f}×", got, f"{fetch_ratio:.2f}×"])
    result.table(["protection", "publish msg/s", f"÷ {BASELINE}", "fetch msg/s", f"÷ {BASELINE}"], rows)
    result.notes.append(
        f"A KDC and an HBase of the benchmark's own, one ThriftServer JVM per protection (-threadpool, {jit}); "
        f"fetch: the median of {sizes.fetches} fetches of the whole topic per protection and round. Stated, not a "
        "goal."
    )
    result.samples = {"publish_msgs_per_s": publish, "fetch_msgs_per_s": fetch, "batches": sizes.batches}
    return result
