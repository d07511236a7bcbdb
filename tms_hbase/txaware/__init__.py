"""Tephra's application side: ``context`` (the TransactionAware protocol and the TransactionContext that drives its
participants over :class:`~tms_hbase.tx.client.TransactionClient`) and ``table`` (TransactionalTable, a small
TransactionAware HBase table). The messaging participants are :mod:`tms_hbase.client_tx` and the consumers."""
