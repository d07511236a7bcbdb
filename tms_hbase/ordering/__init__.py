"""Orderings of a topic generation's rows (docs/ordering.md): the chain and the sequencer, one interface.

What differs between them is here: how a batch row gets its position (the chain's conditional put at the
tail; the sequencer's reservation, then a conditional put within W), how a time seek searches, and how a
read walks the rows (swept gaps; the sequencer's holes, skip markers and low-water mark). The reader and the
writer keep what is common and call the ordering their topic's metadata names, through
:class:`~.base.OrderedReads` (``seek``, ``rows``) and :class:`~.appends.OrderedAppends` (``append``):

* the chain: :mod:`.chain_reads`, :mod:`.chain_appends`;
* the sequencer: :mod:`.sequencer_reads`, :mod:`.sequencer_appends`, its offsets (:mod:`.reservations`) and
  the protocol's cells in HBase (:mod:`.sequencer`: counter, skip markers and index, low water, frontier);
* shared by both: one-row reads by position (:mod:`.lookup`), a seek's probes (:mod:`.pivots`), and what
  an interrupted append resumes from (:mod:`.appends`).
"""
