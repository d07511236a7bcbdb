"""The sweeper: does what CDAP's HBase coprocessors do at compaction (TTL, old generations, invalid tx)."""
