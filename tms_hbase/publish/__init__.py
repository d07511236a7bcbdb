"""Publishing: the writer (what both orderings share), stored payloads, rollbacks, and the background publisher."""
