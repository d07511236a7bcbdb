# tms-hbase's own image: the library with tms-admin, tms-sweeper and tms-gateway (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY tms_hbase tms_hbase
COPY admin admin
COPY compactor compactor
COPY gateway gateway
RUN pip install --no-cache-dir '.[gateway]' && rm -rf /src
WORKDIR /
USER nobody
EXPOSE 8080
CMD ["tms-gateway", "--host", "0.0.0.0", "--port", "8080"]
