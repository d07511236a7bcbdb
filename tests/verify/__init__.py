"""A fault-injection verification suite in the spirit of Jepsen: real writer, reader, consumer,
sweeper and transaction-server processes work on one installation while a seeded nemesis kills, pauses,
skews the clocks of and cuts them off from HBase; every operation goes into a history, and a checker
looks for anomalies in it. Run ``python -m tests.verify --help``; ``make verify`` and ``make verify-quick``.

Modules: ``history`` (the record every process writes), ``worker`` (the process roles), ``nemesis`` (the
faults), ``runner`` (phases and processes), ``checker`` (anomalies in a history), ``own_hbase`` (a second,
private local HBase for the restart fault).
"""
