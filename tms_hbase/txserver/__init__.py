"""The transaction server (``tms-admin tx serve``): Tephra's TTransactionServer Thrift service (``server``, on the
socket of ``listener``) over a pure port of Tephra's TransactionManager (``manager``, its state changed only by the
replayable edits of ``edits``) whose state is kept in HBase as an edit log and snapshots (``state_store``).
Clients use :mod:`tms_hbase.tx` (the types, their codecs and the Thrift client); nothing of the messaging
library imports this package except to read the stored state (``isolation``, ``sweep.pruning``); the
sweeper gets its view of that state from ``snapshot_source`` (from this server's stored state or any Tephra server).
"""
