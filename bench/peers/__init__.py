"""tms-hbase side by side with the systems users would pick instead: Apache Kafka, NATS
JetStream and Redis Streams, each started by the benchmark on loopback, running the same workloads.

| module | job |
|---|---|
| ``__main__`` | arguments, starts the servers, runs the workloads, prints the report, exit code |
| ``workloads`` | the workloads: trials, rounds, rotation, failure isolation |
| ``jobs`` | what the worker processes run, the same for every system |
| ``system`` | the Server and Client interface of a system, and the registry |
| ``tms_peer``, ``kafka_peer``, ``nats_peer``, ``redis_peer`` | one system each: server and client |
| ``servers`` | server processes: free ports, start, wait, stop with nothing left behind |
| ``report`` | medians, ratios to tms-hbase, the markdown and JSON report |
"""
