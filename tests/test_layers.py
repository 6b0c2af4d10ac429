"""Layers, not circles: no import cycle among crew's modules, counting imports inside functions
(a deferred import hides a cycle from Python, not from the design)."""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> dict[str, Path]:
    """crew's packages and their folders, as setup.cfg lists and maps them (package_dir)."""
    import configparser

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    options = setup["options"]
    mapped = dict(line.split(" = ") for line in options["package_dir"].strip().splitlines())
    found = {}
    for package in options["packages"].split():
        folder = ROOT / mapped[package] if package in mapped else ROOT / package.replace(".", "/")
        if (folder / "__init__.py").exists() and not package.endswith((".prompts", ".static", ".recipes")):
            found[package] = folder
    return found


PACKAGES = _packages()


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the crew module imported
    line: int
    in_function: bool
    type_checking: bool  # under `if TYPE_CHECKING:`: read by type checkers only


def modules() -> dict[str, Path]:
    """Every crew module by its dotted name, as setup.cfg's package_dir maps the folders."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The crew module `name` loads (the longest known prefix of it), None for another library."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Import]:
    found = []
    package = module if path.stem == "__init__" else module.rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            in_function = True
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, in_function, True)
            for child in node.orelse:
                visit(child, in_function, type_checking)
            return
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            # `from package import module` loads the module; `from module import name` the module
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for target in targets:
            crew = resolve(target, known)
            if crew is not None and crew != module:
                found.append(Import(module, crew, node.lineno, in_function, type_checking))
        for child in ast.iter_child_nodes(node):
            visit(child, in_function, type_checking)

    visit(ast.parse(path.read_text(), str(path)), False, False)
    return found


def all_imports() -> list[Import]:
    known = modules()
    return [found for module, path in known.items() for found in imports_of(module, path, known)]


def cycles(edges: list[Import]) -> list[tuple[list[str], list[str]]]:
    """For each group of modules that import each other (directly or around a longer loop): one
    shortest cycle through its first module, as a path that ends where it starts, and the group."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return sorted(
        (shortest_cycle(min(group), graph, group), sorted(group))
        for group in strongly_connected(graph)
        if len(group) > 1
    )


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def shortest_cycle(start: str, graph: dict[str, set[str]], group: set[str]) -> list[str]:
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    return [*paths[node], start]
                if child not in paths:
                    paths[child] = [*paths[node], child]
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group but on no cycle")


def describe(found: list[tuple[list[str], list[str]]], edges: list[Import]) -> str:
    """Each cycle (with its whole group, where that is larger), and the import behind each step."""
    lines = []
    known = modules()
    where = {(edge.source, edge.target): edge for edge in edges}
    for cycle, group in found:
        larger = len(group) > len(cycle) - 1
        lines.append(" -> ".join(cycle) + (f"  (group: {', '.join(group)})" if larger else ""))
        for source, target in itertools.pairwise(cycle):
            edge = where[source, target]
            how = "inside a function" if edge.in_function else "at module top"
            how += ", under TYPE_CHECKING" if edge.type_checking else ""
            path = known[source].relative_to(ROOT) if source in known else source
            lines.append(f"    {path}:{edge.line} imports {target} ({how})")
    return "\n".join(lines)


@pytest.mark.slow
def test_no_import_cycle_among_runtime_imports():
    edges = [edge for edge in all_imports() if not edge.type_checking]
    found = cycles(edges)
    assert not found, "import cycles, counting imports inside functions:\n" + describe(found, edges)


@pytest.mark.slow
def test_no_import_cycle_counting_type_checking_imports():
    edges = all_imports()
    found = cycles(edges)
    assert not found, "import cycles, counting TYPE_CHECKING imports:\n" + describe(found, edges)


# The checker itself, on small made-up graphs.


def edge(source: str, target: str) -> Import:
    return Import(source, target, 1, False, False)


def test_cycles_names_each_cycle_once_from_its_first_module():
    edges = [edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d"), edge("d", "e"), edge("e", "d")]
    assert cycles(edges) == [(["a", "b", "c", "a"], ["a", "b", "c"]), (["d", "e", "d"], ["d", "e"])]


def test_a_cycle_is_named_with_every_module_of_its_group():
    edges = [edge("a", "b"), edge("b", "a"), edge("b", "c"), edge("c", "a")]
    found = cycles(edges)
    assert found == [(["a", "b", "a"], ["a", "b", "c"])]
    assert describe(found, edges).splitlines()[0] == "a -> b -> a  (group: a, b, c)"


def test_a_layered_graph_has_no_cycle():
    assert cycles([edge("a", "b"), edge("a", "c"), edge("b", "c")]) == []


def test_imports_inside_functions_and_type_checking_blocks_are_all_collected(tmp_path):
    (tmp_path / "x.py").write_text(
        "from typing import TYPE_CHECKING\nimport os\nfrom . import y\n"
        "if TYPE_CHECKING:\n    from p.y import Thing\n"
        "def f():\n    import p.y.z\n    from .y import other\n"
    )
    (tmp_path / "y.py").write_text("")
    known = {"p": tmp_path, "p.x": tmp_path / "x.py", "p.y": tmp_path / "y.py"}
    found = imports_of("p.x", tmp_path / "x.py", known)
    assert [(i.target, i.line, i.in_function, i.type_checking) for i in found] == [
        ("p.y", 3, False, False),
        ("p.y", 5, False, True),
        ("p.y", 7, True, False),
        ("p.y", 8, True, False),
    ]
