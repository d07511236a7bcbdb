"""Publishing: the writer of both orderings, the sequencer's offsets and blocks, and the background publisher."""
