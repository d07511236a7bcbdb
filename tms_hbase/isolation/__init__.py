"""What readers outside a transaction judge transactional rows by: the fate of a write pointer (``fate``) and
the committed-only view of subscriptions and Spark streams (``committed``), both read from the transaction
server or, without it, from the state it keeps in HBase (:mod:`tms_hbase.txserver.state_store`)."""
