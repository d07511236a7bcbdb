"""Orderings of a topic generation's rows (docs/ordering.md): the chain and the sequencer, one interface.

What differs between them is here: how a row gets its position, how a time seek searches, and how a read
walks the rows (swept gaps; the sequencer's holes, skip markers and low-water mark). The reader and the
writer keep what is common and call the ordering their topic's metadata names.
"""
