"""docs/architecture.md tells the truth: every crew module is in one of its layers, the imports
(tests/test_layers.py's graph: inside functions and under TYPE_CHECKING too) go down its layers,
none up, and every file, module and name it mentions exists. And no function is longer than a
reader can hold: MAX_LINES."""

from __future__ import annotations

import ast
import importlib
import re

import pytest

from test_layers import ROOT, all_imports, modules

MAX_LINES = 60  # of one function, its docstring and body (decorators apart)
MAX_ROOT = 25  # modules at crewbridge/'s root
PAGE = ROOT / "docs" / "architecture.md"
TEXT = PAGE.read_text()


def layers() -> dict[str, int]:
    """Each module → the number of its layer, from the page's table of layers."""
    found: dict[str, int] = {}
    for number, cells in re.findall(r"^\| (\d+)\. [^|]+\|[^|]+\|([^|]+)\|$", TEXT, re.M):
        for module in re.findall(r"`([\w.]+)`", cells):
            assert module not in found, f"{module} is in two layers"
            found[module] = int(number)
    return found


def test_every_module_is_in_one_layer():
    assert set(layers()) == set(modules())


@pytest.mark.slow
def test_no_import_goes_up_a_layer():
    layer = layers()
    upward = sorted({(edge.source, edge.target) for edge in all_imports() if layer[edge.source] < layer[edge.target]})
    assert upward == []
    assert "No import goes up a layer." in TEXT


def test_every_file_module_and_name_it_mentions_exists():
    references = re.findall(r"`([^`\s]+)`", TEXT)
    for reference in references:
        if ":" in reference and reference.startswith("crewbridge"):  # crewbridge.engine.loop:AgentLoop.converse
            module, _, name = reference.partition(":")
            target = importlib.import_module(module)
            for part in name.split("."):
                target = getattr(target, part)
        elif reference.endswith((".py", ".md", "/")):  # a file or a folder of the repository
            assert (ROOT / reference).exists() or (PAGE.parent / reference).exists(), reference
        elif re.fullmatch(r"crewbridge(\.\w+)*", reference):
            assert reference in modules(), reference
    for link in re.findall(r"\]\(([^)#]+)", TEXT):
        assert (PAGE.parent / link).exists(), link


def test_the_folders_are_the_layers():
    """At most MAX_ROOT modules at the root; every other module of crewbridge/ lives in a folder
    whose modules share one layer (mcp/ and ui/, whose link and protocol went down, apart: their
    modules are all faces now)."""
    layer = layers()
    root = [module for module, path in modules().items() if path.parent == ROOT / "crewbridge"]
    assert len(root) <= MAX_ROOT, root
    folders: dict[str, set[int]] = {}
    for module, path in modules().items():
        if path.parent != ROOT / "crewbridge" and ROOT / "crewbridge" in path.parents:
            folders.setdefault(path.parent.name, set()).add(layer[module])
    mixed = {folder: found for folder, found in folders.items() if len(found) > 1}
    assert mixed == {}


def test_the_checks_read_the_page():
    assert len(layers()) > 50
    assert len(re.findall(r"`crewbridge[\w.]*:", TEXT)) > 30  # the names the path of one query follows


@pytest.mark.slow
def test_no_function_in_the_package_is_longer_than_sixty_lines():
    longer = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    longer.append(f"{module}:{node.name} ({lines} lines)")
    assert longer == []


def test_the_length_check_reads_functions_and_methods_alike(tmp_path):
    body = "\n".join(f"    x = {n}" for n in range(MAX_LINES))
    tree = ast.parse(f"def f():\n{body}\nclass C:\n    def g(self):\n        pass\n")
    lengths = {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert lengths == {"f": MAX_LINES + 1, "g": 2}
