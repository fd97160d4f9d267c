"""How often a use case climbs back to the composition root (``playlisteval/app.py``).

Follows the ``app`` parameter of one use case (default ``playlisteval/runs/evaluation.py:evaluate``)
through the calls of its own module: every place that names ``app`` counts as a place it
stays in; every use that reaches code or parts of ``app.py`` counts as a climb — an attribute
or method of ``App`` (``app.events``, ``app.writer(…)``; ``app.settings`` too: a use case that
reads settings composes for itself), a free function of ``app.py`` called (``model_factory``),
and a helper of the same module handed ``app`` (followed in turn, once).

    .venv/bin/python scripts/climb_count.py [MODULE FUNCTION]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _app_functions() -> set[str]:
    tree = ast.parse((ROOT / "playlisteval" / "app.py").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def count(module: Path, function: str) -> tuple[int, int, list[str]]:
    """``(places, climbs, what each climb is)`` of ``function`` in ``module``."""
    tree = ast.parse(module.read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    free = _app_functions()
    places = climbs = 0
    what: list[str] = []
    seen: set[str] = set()
    todo = [function]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name) and node.id == "app":
                places += 1
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "app"
            ):
                climbs += 1
                what.append(f"{name}: app.{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = node.func.id
                if callee in free:
                    climbs += 1
                    what.append(f"{name}: {callee}()")
                handed = any(isinstance(a, ast.Name) and a.id == "app" for a in node.args)
                if handed and callee in defs:
                    todo.append(callee)
    return places, climbs, what


def main() -> None:
    """Print the counts of the use case named on the command line (or ``runs.evaluate``)."""
    module, function = (
        (ROOT / sys.argv[1], sys.argv[2])
        if len(sys.argv) == 3
        else (ROOT / "playlisteval" / "runs" / "evaluation.py", "evaluate")
    )
    places, climbs, what = count(module, function)
    print(f"{module.relative_to(ROOT)}:{function}: app named in {places} places, {climbs} climbs")
    for line in what:
        print(f"  {line}")


if __name__ == "__main__":
    main()
