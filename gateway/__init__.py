"""tms-gateway: the seed's REST API over HTTP, served by the tms_hbase library (issue 12, docs/gateway.md)."""
