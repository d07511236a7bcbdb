"""The REST protocol of the gateway and GatewayClient, its Python client over HTTP/1.1."""
