"""docs/architecture.md stays true: its layer table is the import-linter contract in pyproject.toml, its
error table is tms_hbase.errors (every class, its bases and ``retriable``), and its method list is
MessagingClient's public surface."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

from tms_hbase import errors
from tms_hbase.client import MessagingClient
from tms_hbase.client_admin import ClientAdmin
from tms_hbase.client_slices import Slices

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _table(header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header line starts with ``header``."""
    lines = DOC.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, f"the table {header!r} is empty"
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([A-Za-z_][\w.]*)`", cell)


def _module(name: str) -> str:
    return name if name.startswith("tms_hbase_") or name.startswith("tms_hbase.") else f"tms_hbase.{name}"


def test_the_layer_table_is_the_import_linter_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    expected = [{m.strip() for m in re.split(r"[|:]", layer)} for layer in contract["layers"]]
    documented = [{_module(name) for name in _names(row[1])} for row in _table("| Layer | Modules |")]
    assert len(documented) == len(expected), "docs/architecture.md has another number of layers than pyproject.toml"
    for number, (doc, code) in enumerate(zip(documented, expected, strict=True)):
        layer = len(expected) - number
        assert doc == code, (
            f"layer {layer}: only in docs/architecture.md {sorted(doc - code)}, "
            f"only in pyproject.toml {sorted(code - doc)}"
        )


def _error_classes() -> dict[str, type[errors.TmsError]]:
    return {
        name: value
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.TmsError) and value.__module__ == errors.__name__
    }


def test_the_error_table_is_tms_hbase_errors() -> None:
    classes = _error_classes()
    rows = {_names(row[0])[0]: row for row in _table("| Class | Base | `retriable` |")}
    assert set(rows) == set(classes), (
        f"missing from docs/architecture.md: {sorted(set(classes) - set(rows))}; "
        f"not in tms_hbase.errors: {sorted(set(rows) - set(classes))}"
    )
    for name, (_, bases, retriable, when) in rows.items():
        cls = classes[name]
        assert _names(bases) == [base.__name__ for base in cls.__bases__], f"{name}: bases"
        assert retriable == ("yes" if cls.retriable else "no"), f"{name}: retriable"
        assert when, f"{name}: say when it is raised"


def _public_surface() -> set[str]:
    """MessagingClient's public methods and properties, and those of its sub-objects as ``admin.x``."""
    parts: dict[str, type] = {"": MessagingClient, "admin.": ClientAdmin, "slices.": Slices}
    return {
        prefix + name
        for prefix, cls in parts.items()
        for name in dir(cls)
        if not name.startswith("_")
        and (callable(inspect.getattr_static(cls, name)) or isinstance(inspect.getattr_static(cls, name), property))
    }


def test_the_method_list_is_messaging_clients_public_surface() -> None:
    documented = [name for row in _table("| Group | Methods |") for name in _names(row[1])]
    assert len(documented) == len(set(documented)), "a method is listed twice"
    surface = _public_surface()
    assert set(documented) == surface, (
        f"missing from docs/architecture.md: {sorted(surface - set(documented))}; "
        f"not on MessagingClient: {sorted(set(documented) - surface)}"
    )
