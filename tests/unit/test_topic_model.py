"""Topic names, TTL and property rules, and the metadata encoding: pure code, no HBase."""

from __future__ import annotations

import pytest

from tms_hbase import CorruptData, InvalidArgument, TopicId, TopicMetadata
from tms_hbase.config import table_prefix, thrift_address
from tms_hbase.model.topic import DEFAULT_TTL_SECONDS, parse_ttl, user_properties


@pytest.mark.parametrize("name", ["a", "Z9", "with-dash", "under_score", "x" * 255])
def test_good_names(name: str) -> None:
    assert TopicId(name, name).key == f"{name}:{name}:".encode()


@pytest.mark.parametrize("name", ["", "a b", "a:b", "dot.ted", "é", "x" * 256, "new\nline", None, 5])
def test_bad_names_are_invalid_argument(name: object) -> None:
    with pytest.raises(InvalidArgument, match=r"bad (namespace|topic) name"):
        TopicId(name, "t")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        TopicId("ns", name)  # type: ignore[arg-type]


def test_invalid_argument_is_also_value_error() -> None:
    with pytest.raises(ValueError):
        TopicId("a b", "t")


def test_parse_round_trips_and_rejects_missing_colon() -> None:
    assert TopicId.parse("ns:t") == TopicId("ns", "t")
    assert str(TopicId("ns", "t")) == "ns:t"
    for text in ["nocolon", "ns:t:extra", ":t", "ns:"]:
        with pytest.raises(InvalidArgument):
            TopicId.parse(text)


def test_topic_keys_are_prefix_free() -> None:
    assert not TopicId("ns", "ab").key.startswith(TopicId("ns", "a").key)


@pytest.mark.parametrize("value, seconds", [("1", 1), ("3600", 3600), (60, 60), ("007", 7)])
def test_good_ttls(value: object, seconds: int) -> None:
    assert parse_ttl(value) == seconds


@pytest.mark.parametrize("value", ["xyz", "0", "-1", "-5", "1.5", " 5", "", "1e3", None, True, 0, -3, 2**63])
def test_bad_ttls(value: object) -> None:
    with pytest.raises(InvalidArgument, match="bad ttl"):
        parse_ttl(value)


def test_user_properties_default_ttl_and_reserved_generation() -> None:
    assert user_properties(None) == {"ttl": str(DEFAULT_TTL_SECONDS)}
    assert user_properties({"ttl": 30, "k": "v"}) == {"ttl": "30", "k": "v"}
    with pytest.raises(InvalidArgument, match="generation"):
        user_properties({"generation": "5"})
    with pytest.raises(InvalidArgument, match="expected a string"):
        user_properties({"k": 5})
    with pytest.raises(InvalidArgument, match="mapping"):
        user_properties([("ttl", "5")])  # type: ignore[arg-type]


def test_metadata_encoding_is_sorted_compact_json_and_round_trips() -> None:
    topic = TopicId("ns", "t")
    meta = TopicMetadata(topic, {"ttl": "10", "generation": "-3", "b": "x"})
    assert meta.encode() == b'{"b":"x","generation":"-3","ttl":"10"}'
    back = TopicMetadata.decode(topic, meta.encode())
    assert (back.generation, back.ttl, back.exists) == (-3, 10, False)
    assert back.encode() == meta.encode()


@pytest.mark.parametrize("data", [b"not json", b"[]", b'{"ttl":"1"}', b'{"generation":"x","ttl":"1"}'])
def test_corrupt_metadata_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(CorruptData, match="ns:t"):
        TopicMetadata.decode(TopicId("ns", "t"), data)


def test_address_and_prefix_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMS_HBASE_THRIFT", raising=False)
    monkeypatch.delenv("TMS_TABLE_PREFIX", raising=False)
    assert thrift_address(None) == ("127.0.0.1", 9090)
    assert thrift_address("h:1") == ("h", 1)
    monkeypatch.setenv("TMS_HBASE_THRIFT", "envhost:9999")
    monkeypatch.setenv("TMS_TABLE_PREFIX", "p1")
    assert thrift_address(None) == ("envhost", 9999)
    assert table_prefix(None) == "p1"
    for bad in ["nohost", "h:", "h:0", "h:70000", "h:x"]:
        with pytest.raises(InvalidArgument, match="Thrift address"):
            thrift_address(bad)
    for bad in ["has space", "a/b", "x" * 65, ".x", "-x", "ns:p"]:
        with pytest.raises(InvalidArgument, match="table prefix"):
            table_prefix(bad)


def test_thrift_errors_with_bytes_messages_are_described() -> None:
    from thriftpy2.thrift import TApplicationException

    from tms_hbase.storage.connection import _reason

    assert _reason(TApplicationException(message=b"Invalid method name\nmore")) == "Invalid method name"
    assert _reason(OSError("Connection refused")) == "Connection refused"


def test_one_argument_is_parsed_as_namespace_colon_topic() -> None:
    import pickle

    assert TopicId("billing:invoices") == TopicId("billing", "invoices") == TopicId.parse("billing:invoices")
    assert hash(TopicId("a:b")) == hash(TopicId("a", "b")) and repr(TopicId("a:b")) == repr(TopicId("a", "b"))
    assert pickle.loads(pickle.dumps(TopicId("a:b"))) == TopicId("a", "b")
    for bad in ("nocolon", "a:b:c", ":b", "a:", 5):
        with pytest.raises(InvalidArgument):
            TopicId(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="bad topic name ''"):
        TopicId("a", "")
