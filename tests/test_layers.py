"""The layering holds: ``playlisteval → agents → tools, policies → store``, nothing imports
upward, and no module imports itself back through others (lazy imports inside functions
included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("playlisteval", "agents", "tools", "policies", "store")
# What each layer may import of ours (besides itself).
ALLOWED = {
    "store": set(),
    "policies": {"store"},
    "tools": {"store"},
    "agents": {"tools", "policies", "store"},
    "playlisteval": {"agents", "tools", "policies", "store"},
}


def _imports() -> dict[str, set[str]]:
    """Module → the modules of ours it imports (anywhere in it)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            found: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module)
                elif isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
            graph[module] = {m for m in found if m.split(".")[0] in PACKAGES}
    return graph


GRAPH = _imports()


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    layer = module.split(".")[0]
    upward = {m for m in GRAPH[module] if m.split(".")[0] not in ALLOWED[layer] | {layer}}
    assert not upward, f"{module} imports {sorted(upward)}"


def test_there_is_no_import_cycle() -> None:
    known = set(GRAPH)

    def target(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    edges = {m: {t for n in deps if (t := target(n)) and t != m} for m, deps in GRAPH.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(edges):
        if module not in state and (cycle := visit(module)):
            pytest.fail("import cycle: " + " → ".join(cycle))


# Private names of other projects we import, each with why (a public equivalent does not exist).
FOREIGN_PRIVATE = {
    # pydantic-ai's own mapping of google-genai errors to ModelHTTPError / ModelAPIError: the
    # Gemini adapter must raise exactly what pydantic-ai's GoogleModel raises.
    ("tools.providers.gemini", "pydantic_ai.models.google", "_map_api_error"),
}


def _private_imports() -> list[tuple[str, str, str]]:
    """(module, imported-from, name) for every ``from X import _name`` in our packages and tests."""
    found: list[tuple[str, str, str]] = []
    for package in (*PACKAGES, "tests", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        name = alias.name
                        if name.startswith("_") and not name.startswith("__"):
                            found.append((module, node.module, name))
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    ours = [
        f"{module} imports {name} from {source}"
        for module, source, name in _private_imports()
        if source.split(".")[0] in (*PACKAGES, "tests", "bench")
    ]
    assert not ours, "make these public or move them: " + "; ".join(ours)
    foreign = {
        imported
        for imported in _private_imports()
        if imported[1].split(".")[0] not in (*PACKAGES, "tests", "bench")
    }
    assert foreign <= FOREIGN_PRIVATE, (
        f"private names of other projects: {foreign - FOREIGN_PRIVATE}"
    )
