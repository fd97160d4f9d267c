"""The ``runs`` package hands its use cases on lazily (a name is imported when first used), and
no submodule shadows one of those names: importing a submodule puts it on the package, where
a name of the same spelling would then be the module, not the function."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import playlisteval.runs as runs


def test_no_submodule_is_named_as_a_name_the_package_hands_on() -> None:
    submodules = {m.name for m in pkgutil.iter_modules(runs.__path__)}
    assert submodules, "the package has no submodules (not a vacuous pass)"
    assert not submodules & set(runs._LAZY), submodules & set(runs._LAZY)


def test_every_name_is_found_where_the_table_says_even_after_its_module_is_imported() -> None:
    code = (
        "import importlib, playlisteval.runs as r\n"
        "for name, module in r._LAZY.items():\n"
        "    importlib.import_module(module)\n"
        "    assert getattr(r, name) is getattr(importlib.import_module(module), name), name\n"
        "print(len(r._LAZY))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(runs._LAZY)
    assert callable(importlib.import_module("playlisteval.runs").audit)
