"""No import knot among the library's packages: counting every import a module can make at run time (at load
and inside functions, TYPE_CHECKING-only ones aside), no two packages of ``tms_hbase`` reach each other.

import-linter's contracts (pyproject.toml) order modules, and a package whose modules sit in several layers
(or two packages in one layer) can still close a loop with another package; a late import inside a function
(made so that ``import tms_hbase`` loads less) is a dependency all the same. Packages in a loop can be read,
tested and moved only together. Each node is ``tms_hbase.<subpackage>`` or a top-level module of ``tms_hbase``.
"""

from __future__ import annotations

from collections import defaultdict

import grimp

Edges = dict[str, dict[str, tuple[str, str]]]


def _node(module: str) -> str:
    """``tms_hbase.<first part>``: a subpackage with all its modules, or a top-level module."""
    return ".".join(module.split(".")[:2])


def _edges() -> Edges:
    """node -> node it imports -> one example (importer, imported) of an import behind that edge."""
    graph = grimp.build_graph("tms_hbase", exclude_type_checking_imports=True, cache_dir=None)
    edges: Edges = defaultdict(dict)
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            source, target = _node(importer), _node(imported)
            if source != target:
                edges[source].setdefault(target, (importer, imported))
    return edges


def _knots(edges: Edges) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    knots: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, {})):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                knots.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return knots


def _describe(knot: list[str], edges: Edges) -> str:
    members = set(knot)
    lines = [f"knot of {len(knot)}: {', '.join(knot)}"]
    for source in knot:
        for target, (importer, imported) in sorted(edges[source].items()):
            if target in members:
                lines.append(f"  {source} -> {target}: {importer} imports {imported}")
    return "\n".join(lines)


def test_no_package_of_tms_hbase_imports_one_that_imports_it() -> None:
    edges = _edges()
    knots = _knots(edges)
    assert knots == [], "import knots (imports inside functions counted):\n" + "\n".join(
        _describe(knot, edges) for knot in knots
    )


def test_the_knot_finder_finds_a_knot_and_names_its_imports() -> None:
    edges: Edges = {
        "tms_hbase.a": {"tms_hbase.b": ("tms_hbase.a.x", "tms_hbase.b.y")},
        "tms_hbase.b": {"tms_hbase.c": ("tms_hbase.b.y", "tms_hbase.c")},
        "tms_hbase.c": {"tms_hbase.a": ("tms_hbase.c", "tms_hbase.a")},
        "tms_hbase.d": {"tms_hbase.a": ("tms_hbase.d.z", "tms_hbase.a.x")},
    }
    knots = _knots(edges)
    assert knots == [["tms_hbase.a", "tms_hbase.b", "tms_hbase.c"]]
    assert "tms_hbase.b -> tms_hbase.c: tms_hbase.b.y imports tms_hbase.c" in _describe(knots[0], edges)
