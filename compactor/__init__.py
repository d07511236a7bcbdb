"""The sweeper: does what CDAP's HBase coprocessors do at compaction (TTL, old generations, invalid tx).

Installed and imported as ``tms_hbase_sweeper`` (setup.cfg maps the folder compactor/ to that name), so that no generic
top-level name clashes with another project's. Imported as ``compactor`` (the source tree on sys.path, as under
pytest) every module would load a second time under a second name, with its own classes and state: refused.
"""

if __name__ != "tms_hbase_sweeper":
    raise ImportError(f"import tms_hbase_sweeper, not {__name__}: the folder compactor/ installs under that name")
