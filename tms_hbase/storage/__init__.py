"""The storage port: the only modules that speak Thrift to HBase (tables, rows, scans, conditional writes, a
pooled connection with failover).
"""
