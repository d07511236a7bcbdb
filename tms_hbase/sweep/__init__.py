"""The sweeper's state kept in HBase: per-region progress and leases, and what `tms-admin sweeper status` shows."""
