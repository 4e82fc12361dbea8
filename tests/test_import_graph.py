"""The import graph of the relwrite package has no circles, between files and between packages.

The graph is read from the source with `ast`, nothing is imported.  Every
`import` and `from ... import` in a file counts wherever it stands: at the top,
inside a function or a class (an import deferred into a function still makes
the two modules depend on each other), and `importlib.import_module` of a
literal name.  Only the body of `if TYPE_CHECKING:` is left out, as it never
runs.  An edge goes to the module a statement names
(`from relwrite.graph import ops` names `relwrite.graph.ops`,
`from relwrite.graph.basic import Variable` names `relwrite.graph.basic`); the
packages around that module are not counted, though Python runs their
`__init__` first: a package's `__init__` importing its own modules is what
packages are for.

Two views are checked: modules (files), and packages (`relwrite.graph`,
`relwrite.engine`, ... and the modules at the root), where the layers meet.
A circle is listed as module names in import order, the first importing the
second and the last the first.  Circles that are known and waiting for a fix
are allowed by name below, with the reason, so they stay visible.  Imports of
a name computed at run time (`importlib.import_module(variable)`) cannot be
followed: each one is listed below with what it loads.

`python tests/test_import_graph.py` prints both graphs and their circles.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

PACKAGE = Path(__file__).resolve().parents[1] / "relwrite"

Graph = Mapping[str, frozenset[str]]
"""Each module's name -> the names of the modules it imports."""

KNOWN_MODULE_CIRCLES: dict[tuple[str, ...], str] = {}
"""Circles between files allowed for now: circle -> why it is still there."""

KNOWN_PACKAGE_CIRCLES: dict[tuple[str, ...], str] = {}
"""Circles between packages allowed for now: circle -> why it is still there."""

KNOWN_DYNAMIC_IMPORTS: dict[tuple[str, str], str] = {
    ("relwrite.cli", "_load_module"): "the user's module of rules named on the command line",
    ("relwrite.engine.explore.foreign", "in_relwrite"): (
        "the bridge of the language an expression given to explore/best_form/improve comes from (BRIDGES: "
        "relwrite.interop.pytensor), above the engine and needing its optional extra only then"
    ),
    ("relwrite.relations.registry", "_module_attribute"): (
        "unpickling a rule kept in a module attribute, by the module path stored in the pickle"
    ),
}
"""Imports of a module named at run time: (module, function) -> what it loads."""


LOWER_LAYERS: dict[str, tuple[str, ...]] = {
    "relwrite.graph": ("relwrite.graph",),
    "relwrite.backends.numpy": ("relwrite.graph", "relwrite.backends.numpy"),
    "relwrite.relations": ("relwrite.graph", "relwrite.relations"),
    "relwrite.backends": ("relwrite.graph", "relwrite.backends"),
}
"""The bottom layers of docs and DESIGN: package -> the packages its modules may import (the language
imports nothing of ours; the NumPy backend knows nothing of the C one; the rules know nothing of the
engine or of evaluation)."""


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at `path` in the package at `root`."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_dynamic_import(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id in ("import_module", "__import__")
    )


def _targets(node: ast.AST, package: str, modules: Iterable[str]) -> set[str]:
    """The modules among `modules` an import statement or `import_module` call names."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & set(modules)
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        named = {f"{base}.{alias.name}" for alias in node.names}
        found = named & set(modules)
        return found | ({base} & set(modules) if found != named else set())
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        return {node.args[0].value} & set(modules)
    return set()


def read_imports(root: Path = PACKAGE) -> tuple[dict[str, frozenset[str]], set[tuple[str, str]]]:
    """The module graph of the package at `root`, and its imports of names computed at run time
    as (module, outermost enclosing function)."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, frozenset[str]] = {}
    dynamic: set[tuple[str, str]] = set()
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        stack: list[tuple[ast.AST, str]] = [(ast.parse(path.read_text(), str(path)), "")]
        while stack:
            node, function = stack.pop()
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                stack.extend((child, function) for child in node.orelse)
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not function:
                function = node.name
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets |= _targets(node, package, files)
            elif isinstance(node, ast.Call) and _is_dynamic_import(node):
                if node.args and isinstance(node.args[0], ast.Constant):
                    targets |= _targets(node, package, files)
                else:
                    dynamic.add((name, function))
            stack.extend((child, function) for child in ast.iter_child_nodes(node))
        targets.discard(name)
        graph[name] = frozenset(targets)
    return graph, dynamic


def package_of(module: str) -> str:
    """The package a module belongs to in the package view: relwrite.X for everything under relwrite/X."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> dict[str, frozenset[str]]:
    """`graph` with the modules of each package merged into one node."""
    merged: dict[str, set[str]] = {}
    for module, targets in graph.items():
        merged.setdefault(package_of(module), set()).update(package_of(t) for t in targets)
    return {p: frozenset(targets - {p}) for p, targets in merged.items()}


def strongly_connected(graph: Graph) -> list[list[str]]:
    """The strongly connected components of `graph` with more than one node (Tarjan's, without
    recursion), each sorted, in order of their first node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def _shortest_path(graph: Graph, start: str, goal: str, within: set[str]) -> list[str]:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for succ in sorted(graph[node]):
            if succ in within and succ not in previous:
                previous[succ] = node
                queue.append(succ)
    path: list[str] = []
    node: str | None = goal
    while node is not None:
        path.append(node)
        node = previous[node]
    return path[::-1]


def circles(graph: Graph) -> list[tuple[str, ...]]:
    """The circles of `graph`: for every edge inside a strongly connected component, the shortest
    circle through it, starting at its smallest name; each circle once, sorted."""
    found: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        for node in component:
            for succ in sorted(graph[node] & members):
                cycle = [node, *_shortest_path(graph, succ, node, members)[:-1]]
                first = cycle.index(min(cycle))
                found.add(tuple(cycle[first:] + cycle[:first]))
    return sorted(found)


def _describe(circle: tuple[str, ...], graph: Graph | None = None) -> str:
    text = " -> ".join((*circle, circle[0]))
    if graph is None:
        return text
    steps = []
    for a, b in zip(circle, (*circle[1:], circle[0])):
        pairs = sorted(
            f"{m} -> {t}" for m in graph if package_of(m) == a for t in graph[m] if package_of(t) == b
        )
        steps.append(f"\n    {a} -> {b}: {', '.join(pairs)}")
    return text + "".join(steps)


def _check(found: list[tuple[str, ...]], known: Mapping[tuple[str, ...], str], modules: Graph | None) -> None:
    new = [c for c in found if c not in known]
    gone = [c for c in known if c not in found]
    problems = [f"import circle: {_describe(c, modules)}" for c in new]
    problems += [f"known circle no longer there, remove it from the allow-list: {_describe(c)}" for c in gone]
    assert not problems, "\n".join(problems)


GRAPH, DYNAMIC = read_imports()


def test_no_circles_between_modules():
    _check(circles(GRAPH), KNOWN_MODULE_CIRCLES, None)


def test_no_circles_between_packages():
    _check(circles(package_graph(GRAPH)), KNOWN_PACKAGE_CIRCLES, GRAPH)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("layer", sorted(LOWER_LAYERS))
def test_the_lower_layers_import_only_what_is_below_them(layer: str) -> None:
    allowed = LOWER_LAYERS[layer]
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _within(module, layer)
        for target in targets
        if not any(_within(target, p) for p in allowed)
    )
    assert not wrong, f"{layer} may import only {', '.join(allowed)}: " + "; ".join(wrong)


def test_imports_of_names_computed_at_run_time_are_the_known_ones():
    known = set(KNOWN_DYNAMIC_IMPORTS)
    assert known == DYNAMIC, f"new: {sorted(DYNAMIC - known)}; gone: {sorted(known - DYNAMIC)}"


def test_the_reader_sees_deferred_imports_and_leaves_out_type_checking_blocks(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from pkg import a\n")
    (root / "a.py").write_text("def f():\n    from pkg.sub import b\n    return b\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "b.py").write_text(
        "import importlib\nclass C:\n    def g(self):\n        from .. import a\n"
    )
    (root / "c.py").write_text(
        "from typing import TYPE_CHECKING\nimport importlib\nif TYPE_CHECKING:\n    from pkg import a\n"
        "else:\n    from pkg.sub.b import C\nX = importlib.import_module('pkg.a')\n"
        "def h(name):\n    return importlib.import_module(name)\n"
    )
    graph, dynamic = read_imports(root)
    assert graph == {
        "pkg": frozenset({"pkg.a"}),
        "pkg.a": frozenset({"pkg.sub.b"}),
        "pkg.sub": frozenset(),
        "pkg.sub.b": frozenset({"pkg.a"}),
        "pkg.c": frozenset({"pkg.sub.b", "pkg.a"}),
    }
    assert dynamic == {("pkg.c", "h")}
    assert circles(graph) == [("pkg.a", "pkg.sub.b")]
    assert circles(
        package_graph({"r.a.x": frozenset({"r.b.y"}), "r.b.y": frozenset({"r.a.z"}), "r.a.z": frozenset()})
    )
    assert (
        circles(
            package_graph({"r.a.x": frozenset({"r.a.z"}), "r.a.z": frozenset({"r.a.x"}), "r.b": frozenset()})
        )
        == []
    )


graphs = st.dictionaries(
    st.sampled_from("abcdefg"), st.frozensets(st.sampled_from("abcdefg"), max_size=3), min_size=1
).map(lambda g: {n: frozenset(t for t in g.get(n, ()) if t != n) for n in "abcdefg"})


@given(graphs)
def test_circles_are_real_and_found_exactly_when_the_graph_has_one(graph: dict[str, frozenset[str]]) -> None:
    found = circles(graph)
    for circle in found:
        assert len(set(circle)) == len(circle) >= 2
        assert all(b in graph[a] for a, b in zip(circle, (*circle[1:], circle[0])))
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError:
        assert found
    else:
        assert found == []
    in_components = {n: k for k, c in enumerate(strongly_connected(graph)) for n in c}
    on_circles = {(a, b) for c in found for a, b in zip(c, (*c[1:], c[0]))}
    for a, targets in graph.items():
        for b in targets:
            assert ((a, b) in on_circles) == (a in in_components and in_components.get(b) == in_components[a])


def _print(
    title: str, graph: Graph, found: list[tuple[str, ...]], known: Mapping, modules: Graph | None
) -> bool:
    """Print `graph` and its circles; True when every circle is a known one."""
    print(f"# {title}")
    for name in sorted(graph):
        print(f"{name} -> {', '.join(sorted(graph[name])) or '(nothing of relwrite)'}")
    print(f"\n# circles between {title}: {len(found)}")
    for circle in found:
        print(("known: " if circle in known else "") + _describe(circle, modules))
        if circle in known:
            print(f"    why: {known[circle]}")
    print()
    return all(c in known for c in found)


if __name__ == "__main__":
    packages = package_graph(GRAPH)
    clean = _print("modules", GRAPH, circles(GRAPH), KNOWN_MODULE_CIRCLES, None)
    clean &= _print("packages", packages, circles(packages), KNOWN_PACKAGE_CIRCLES, GRAPH)
    print("# imports of a name computed at run time")
    for module, function in sorted(DYNAMIC):
        print(f"{module}.{function}: {KNOWN_DYNAMIC_IMPORTS.get((module, function), 'not known')}")
    sys.exit(0 if clean and set(KNOWN_DYNAMIC_IMPORTS) == DYNAMIC else 1)
