"""Reading the settings imports no model SDK: the provider families are known from their specs
(``tools.providers.specs``) and the model slots from ``tools.contracts.model_slots``; an SDK is
imported
when a model of its family is first built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from store.errors import ConfigError
from tools.providers.family import Deferred, families

ROOT = Path(__file__).resolve().parent.parent
# The SDKs (and the frameworks under them) a settings read must not import; nor the store's
# database layer, the event loop or pydantic-settings (whose import alone, asyncio and its CLI
# with it, cost every command ~0.1 s: the variables are read by playlisteval.settings itself).
HEAVY = (
    "pydantic_ai",
    "openai",
    "google.genai",
    "dashscope",
    "torch",
    "transformers",
    "pydantic_settings",
    "asyncio",
    "sqlalchemy",
)

READ_SETTINGS = """
import json, sys
from playlisteval.settings import load_settings
settings = load_settings(sys.argv[1])
families = sorted(settings.providers.model_extra or {})
print(json.dumps({"families": families, "modules": sorted(sys.modules)}))
"""


def _loaded_by(script: str, *args: str) -> dict[str, list[str]]:
    """What a fresh interpreter running ``script`` printed (its modules, its families)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]


def test_reading_the_settings_imports_no_model_sdk(tmp_path: Path) -> None:
    (tmp_path / "playlisteval.toml").write_text(
        '[models]\nsufficiency = "gpt-5.4"\n\n[providers.gemini]\nrpm = 7\n', encoding="utf-8"
    )
    found = _loaded_by(READ_SETTINGS, str(tmp_path))
    # Every family's block is there, its defaults read from the spec alone.
    assert {"gemini", "openai", "openai_compatible", "dashscope", "transformers"} <= set(
        found["families"]
    )
    assert _heavy(found["modules"]) == []


def test_the_check_sees_an_sdk_a_settings_read_would_import(tmp_path: Path) -> None:
    """The check above can fail: the same read, after building a Gemini family's model, holds
    google.genai and pydantic_ai."""
    script = READ_SETTINGS.replace(
        "settings = load_settings(sys.argv[1])",
        "settings = load_settings(sys.argv[1])\n"
        "from tools.providers.family import family_named\n"
        "family_named('gemini').factory.resolve()",
    )
    modules = _loaded_by(script, str(tmp_path))["modules"]
    assert {"pydantic_ai", "google.genai"} <= set(_heavy(modules))


@pytest.mark.parametrize("name", ["gemini", "openai", "openai-compatible", "dashscope"])
def test_each_family_spec_names_a_factory_its_adapter_module_has(name: str) -> None:
    factory = families()[name].factory
    assert isinstance(factory, Deferred)
    assert callable(factory.resolve())


def test_a_deferred_name_that_is_no_function_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"package\.module:name"):
        Deferred("tools.providers.gemini")
