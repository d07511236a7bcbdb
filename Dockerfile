# tms-hbase's own image: the library and its programs (tms-admin, tms-sweeper, tms-gateway with its extra).
# One image for every daemon; the command picks it (docker-compose.yml):
#   tms-admin tx serve --bind 0.0.0.0        the transaction server (Tephra's protocol, port 15165)
#   tms-sweeper run                          the sweeper
#   tms-gateway --host 0.0.0.0 --open-network  the REST gateway (port 8080, the default command; no tokens)
# Settings come from the environment (TMS_HBASE_THRIFT, TMS_TABLE_PREFIX, ...) or mounted config files.
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY setup.cfg pyproject.toml README.md LICENSE NOTICE ./
COPY tms_hbase tms_hbase
COPY admin admin
COPY compactor compactor
COPY gateway gateway
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=wheel /wheels /wheels
# Our own wheel; its dependencies are pinned to ranges in setup.cfg, as for any pip install of tms-hbase.
# hadolint ignore=DL3013
RUN WHEEL="$(ls /wheels/*.whl)" && pip install --no-cache-dir "${WHEEL}[gateway]" && rm -rf /wheels
ENV PYTHONUNBUFFERED=1
USER 65534:65534
WORKDIR /tmp
EXPOSE 8080 15165
CMD ["tms-gateway", "--host", "0.0.0.0", "--open-network", "--port", "8080"]
