"""The layering holds: ``playlisteval → agents → tools, policies → store``, nothing imports
upward, and no module imports itself back through others (lazy imports inside functions
included); no module uses another's private names, nor an SDK's (pydantic-ai, google-genai,
openai, dashscope)."""

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


#: The rooms of ``tools`` (its sub-packages, each saying in its docstring what it holds) and what
#: each may import of the other rooms, a prefix naming a room, a sub-package or one module;
#: every room may import ``store`` (the layer rule above).
TOOLS_ROOMS: dict[str, set[str]] = {
    "tools.index": {"tools.runtime", "tools.providers.specs"},
    "tools.runtime": set(),
    "tools.evidence": {"tools.index", "tools.contracts"},
    "tools.offline": {"tools.index", "tools.contracts.role_types"},
    "tools.contracts": {"tools.offline.offline_answers"},
    "tools.providers": {"tools.contracts", "tools.offline", "tools.runtime", "tools.index"},
}


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_every_module_of_tools_lives_in_a_room() -> None:
    loose = [m for m in GRAPH if m.startswith("tools.") and _room(m) not in TOOLS_ROOMS]
    assert not loose, f"modules of tools outside its rooms {sorted(TOOLS_ROOMS)}: {loose}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _room(m) in TOOLS_ROOMS))
def test_each_room_of_tools_imports_only_what_its_rule_allows(module: str) -> None:
    room = _room(module)
    allowed = TOOLS_ROOMS[room]
    crossing = {
        m
        for m in GRAPH[module]
        if m.startswith("tools")
        and not _within(m, room)
        and m != "tools"
        and not any(_within(m, prefix) for prefix in allowed)
    }
    assert not crossing, f"{module} ({room}) imports {sorted(crossing)}"


def test_the_room_rules_are_the_rooms_own_words() -> None:
    """Each room's docstring names what it may import, as the rule above has it."""
    import importlib

    for room, allowed in TOOLS_ROOMS.items():
        doc = importlib.import_module(room).__doc__ or ""
        assert "May import" in doc, f"{room} does not say what it may import"
        for prefix in allowed:
            assert prefix in doc, f"{room}'s docstring omits {prefix}"


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


OURS = (*PACKAGES, "tests", "bench")
# SDKs whose private names (an underscore module, function, class or attribute) we never use:
# they change without notice between releases. What we need of them we rebuild on public names
# (e.g. tools/providers/gemini_errors.py for pydantic-ai's Google error mapping).
SDKS = ("pydantic_ai", "pydantic_ai_slim", "google.genai", "openai", "dashscope")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _under(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == root or module.startswith(root + ".") for root in roots)


def _private_imports() -> list[tuple[str, str, str]]:
    """(module, imported-from, name) for every ``from X import _name`` in our packages and tests."""
    found: list[tuple[str, str, str]] = []
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.extend(
                        (module, node.module, alias.name)
                        for alias in node.names
                        if _is_private(alias.name)
                    )
    return found


def _sdk_private_uses(source: str) -> list[str]:
    """Each dotted name of an SDK's that ``source`` reaches with a private part in it: imported
    (``from pydantic_ai.models.google import _map_api_error``, ``import openai._client``,
    ``from pydantic_ai._utils import is_str_dict``) or reached through a name it imported
    (``google_models._map_api_error``, ``GoogleModel._process_response``)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a name in the module → the dotted name it stands for
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                bound[alias.asname or alias.name] = dotted
                used.append(dotted)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                used.append(alias.name)
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    bound[top] = top
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            parts = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                used.append(".".join([bound[value.id], *reversed(parts)]))
    return [
        dotted
        for dotted in used
        if _under(dotted, SDKS) and any(_is_private(part) for part in dotted.split("."))
    ]


def test_no_private_name_is_imported_across_modules() -> None:
    ours = [
        f"{module} imports {name} from {source}"
        for module, source, name in _private_imports()
        if source.split(".")[0] in OURS
    ]
    assert not ours, "make these public or move them: " + "; ".join(ours)
    foreign = sorted(
        f"{module} imports {name} from {source}"
        for module, source, name in _private_imports()
        if source.split(".")[0] not in OURS
    )
    assert not foreign, "private names of other projects: " + "; ".join(foreign)


@pytest.mark.parametrize("package", OURS)
def test_no_private_name_of_an_sdk_is_used(package: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}: {dotted}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for dotted in _sdk_private_uses(path.read_text())
    ]
    assert not found, "use the SDK's public names (or our own code) instead of: " + "; ".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "from pydantic_ai.models.google import _map_api_error as map_google_error",
        "from pydantic_ai._utils import is_str_dict",
        "import openai._client",
        "import pydantic_ai.models.google as g\ng._map_api_error(e, 'm')",
        "import google.genai\ngoogle.genai._common.BaseModel",
        "from dashscope import api_entities\napi_entities._private",
        "from pydantic_ai.models.google import GoogleModel\nGoogleModel._process_response",
    ],
)
def test_the_sdk_check_sees_each_way_of_reaching_a_private_name(source: str) -> None:
    assert _sdk_private_uses(source)


@pytest.mark.parametrize(
    "source",
    [
        "from pydantic_ai.models.google import GoogleModel",
        "from pydantic_ai import __version__",
        "import httpx2\nhttpx2._private",
        "self._client.close()",
        "super()._map_binary_content_item(item)",
    ],
)
def test_the_sdk_check_passes_public_names_and_our_own_privates(source: str) -> None:
    assert not _sdk_private_uses(source)
