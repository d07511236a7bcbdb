"""tms-gateway: CDAP's messaging REST API over HTTP, served by the tms_hbase library (docs/gateway.md).

Installed and imported as ``tms_hbase_gateway`` (setup.cfg maps the folder gateway/ to that name), so that no generic
top-level name clashes with another project's. Imported as ``gateway`` (the source tree on sys.path, as under
pytest) every module would load a second time under a second name, with its own classes and state: refused.
"""

if __name__ != "tms_hbase_gateway":
    raise ImportError(f"import tms_hbase_gateway, not {__name__}: the folder gateway/ installs under that name")
