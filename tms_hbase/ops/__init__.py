"""What operators' tools share: command-line options, daemon logging, and the Prometheus exporter of topics."""
