"""tms-admin: the operator's command line for tms-hbase (topics, tables, the local HBase).

Installed and imported as ``tms_hbase_admin`` (setup.cfg maps the folder admin/ to that name), so that no generic
top-level name clashes with another project's. Imported as ``admin`` (the source tree on sys.path, as under
pytest) every module would load a second time under a second name, with its own classes and state: refused.
"""

if __name__ != "tms_hbase_admin":
    raise ImportError(f"import tms_hbase_admin, not {__name__}: the folder admin/ installs under that name")
