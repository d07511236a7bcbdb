"""The client's topic metadata cache (:class:`~tms_hbase.installation.metadata.MetadataCache`) over the memory
storage port: what this client changed is never served from before the change."""

from __future__ import annotations

import threading

from tms_hbase.installation.metadata import MetadataCache, MetadataStore
from tms_hbase.model.topic import TopicId, TopicMetadata

from ..memory_storage import MemoryInstallation

T = TopicId("ns", "t")


class PausedStore(MetadataStore):
    """A store whose reads on the thread named ``refresh`` stop after reading until let go: a read in flight
    (the doorbells' refresh of another thread) while the caller's thread changes the topic."""

    def __init__(self, installation: MemoryInstallation) -> None:
        super().__init__(installation.metadata)
        self.read_done, self.go_on = threading.Event(), threading.Event()

    def get(self, topic: TopicId) -> TopicMetadata:
        meta = super().get(topic)
        if threading.current_thread().name == "refresh":
            self.read_done.set()
            self.go_on.wait(30)
        return meta


def test_a_read_in_flight_across_a_delete_and_re_create_is_not_kept() -> None:
    store = PausedStore(MemoryInstallation())
    store.create(T)
    cache = MetadataCache(store, max_age=60)
    refresh = threading.Thread(target=cache.get, args=(T,), name="refresh")
    refresh.start()
    assert store.read_done.wait(30)  # generation 1 read, not kept yet
    cache.forget(T)  # as MessagingClient.delete_topic and create_topic do
    store.delete(T)
    cache.forget(T)
    store.create(T)
    store.go_on.set()
    refresh.join(30)
    assert cache.get(T).generation == 2  # not the deleted generation the refresh read: its old messages
