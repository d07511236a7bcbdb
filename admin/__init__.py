"""tms-admin: the operator's command line for tms-hbase (topics, tables, the local HBase)."""
