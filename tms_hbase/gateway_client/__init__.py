"""The gateway's Python clients over HTTP/1.1, GatewayClient and AsyncGatewayClient (the REST API's codecs, which
the gateway shares, are :mod:`tms_hbase.rest`)."""
