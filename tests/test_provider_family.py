"""A provider family is one spec: adding one is its adapter module (plus its prices, its fake
server and its contract-test row), and nothing outside ``tools/providers`` names a family.

The toy family here is found the way the real ones are: its module is put on the
``tools.providers`` package path and discovered with every other module there.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai import Agent

import tools.providers
from playlisteval.app import App, endpoint, provider_config, traffic_for
from playlisteval.doctor import run_checks
from playlisteval.settings import SETTINGS_FILE, Settings, load_settings
from policies.ratelimits import Traffic
from policies.tokens import CallShape, estimate_input_tokens, worst_case_micros
from store.errors import ConfigError
from tools.providers.family import ProviderFamily
from tools.providers.registry import ProviderRegistry, families, family_named

TOY_ADAPTER = '''
"""A toy video provider: answers every call itself (a pydantic-ai FunctionModel)."""

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tools.providers.base import ProviderConfig, ResourceLedger
from tools.providers.family import ProviderFamily


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("toy says hi")])


def toyvid_model(
    model_id: str, config: ProviderConfig, resources: ResourceLedger | None = None
) -> Model:
    return FunctionModel(_answer, model_name=config.model_name)


FAMILY = ProviderFamily(
    name="toyvid",
    factory=toyvid_model,
    about="Toy video provider (a test's).",
    key_env="TOYVID_API_KEY",
    token_rule="openai",
    video="frames",
    batchable=True,
    prefixes=("toy-",),
    min_frames_per_clip=3,
    default_endpoint="https://toy.invalid/v1",
    rpm=42,
)
'''

TOY_SETTINGS = """
[curation]
offline = false

[models]
sufficiency = "toy-1"

[providers.models."toy-1"]
family = "toyvid"
model_name = "toy-one"

[providers.toyvid]
rpm = 7

[budget.price_overrides."toy-1"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""


@pytest.fixture
def toy_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderFamily]:
    """The toy adapter module, on the package path next to the real adapters."""
    folder = tmp_path / "more_providers"
    folder.mkdir()
    (folder / "toyvid_adapter.py").write_text(TOY_ADAPTER, encoding="utf-8")
    monkeypatch.setattr(tools.providers, "__path__", [*tools.providers.__path__, str(folder)])
    yield family_named("toyvid")
    sys.modules.pop("tools.providers.toyvid_adapter", None)


@pytest.fixture
def toy_settings(tmp_path: Path, toy_family: ProviderFamily) -> Settings:
    home = tmp_path / "home"
    home.mkdir()
    (home / SETTINGS_FILE).write_text(TOY_SETTINGS, encoding="utf-8")
    return load_settings(home)


def test_the_built_in_families_are_discovered_from_their_modules() -> None:
    assert {"gemini", "openai", "openai-compatible", "dashscope", "transformers"} <= set(families())
    assert "toyvid" not in families()


def test_a_family_module_on_the_package_path_is_discovered(toy_family: ProviderFamily) -> None:
    assert toy_family.name == "toyvid"
    assert families()["toyvid"] is toy_family


def test_settings_take_the_toy_family_and_its_block_with_defaults_from_its_spec(
    toy_settings: Settings, tmp_path: Path
) -> None:
    block = toy_settings.providers.family("toyvid")
    assert block.rpm == 7  # the file's
    assert block.api_key_env == "TOYVID_API_KEY"  # the spec's
    assert block.max_concurrency == 16  # every family's
    assert toy_settings.providers.models["toy-1"].family == "toyvid"
    plain = load_settings(tmp_path / "plain")
    assert plain.providers.family("toyvid").rpm == 42


def test_an_unknown_family_or_block_is_refused_with_the_known_ones(
    tmp_path: Path, toy_family: ProviderFamily
) -> None:
    with pytest.raises(ConfigError, match=r"no provider family 'toyvd'.*toyvid"):
        load_settings(tmp_path, providers={"models": {"toy-1": {"family": "toyvd"}}})
    with pytest.raises(ConfigError, match=r"\[providers.toyvd\].*gemini.*toyvid"):
        load_settings(tmp_path, providers={"toyvd": {"rpm": 3}})


def test_the_composition_root_reads_the_toy_spec(
    toy_settings: Settings, toy_family: ProviderFamily
) -> None:
    family, found = endpoint(toy_settings, "toy-1")
    assert family is toy_family
    assert found.model_name == "toy-one"
    assert endpoint(toy_settings, "toy-2")[0] is toy_family  # by its id prefix

    with pytest.raises(ConfigError, match="export TOYVID_API_KEY="):
        provider_config(toy_settings, "toy-1", env={})
    config = provider_config(toy_settings, "toy-1", env={"TOYVID_API_KEY": "toy-secret"})
    assert (config.family, config.model_name, config.api_key) == ("toyvid", "toy-one", "toy-secret")

    traffic = traffic_for(toy_settings, live=True)("toy-1")
    assert traffic is not None
    assert traffic.limiter is not None
    assert traffic.batchable is True
    assert (traffic.frame_height, traffic.max_frames, traffic.video_fps) == (480, 512, 0.5)
    assert traffic.min_frames_per_clip == 3
    assert traffic.token_rule == "openai"
    assert traffic.cache_ttl_s is None  # the spec says no context cache


def test_the_toy_token_rule_is_recorded_with_a_run_and_counts_its_calls(
    toy_settings: Settings,
) -> None:
    traffic = traffic_for(toy_settings, live=False)("toy-1")
    assert traffic is not None
    replayed = Traffic.from_facts(traffic.facts())
    assert replayed.token_rule == "openai"
    shape = CallShape("toy-1", text_chars=400, images=((1280, 720),))
    ruled = estimate_input_tokens(replace(shape, token_rule=replayed.token_rule))
    # Counted as an OpenAI id the per-model image table does not list (its dearest rule).
    as_openai = estimate_input_tokens(
        CallShape("gpt-unlisted", text_chars=400, images=((1280, 720),))
    )
    assert ruled == as_openai
    assert ruled != estimate_input_tokens(replace(shape, token_rule="qwen"))
    with App(toy_settings) as app:
        priced = worst_case_micros(app.prices(), CallShape("toy-1", token_rule="openai"))
    assert priced > 0


def test_doctor_reports_the_toy_key_and_endpoint(
    toy_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOYVID_API_KEY", "toy-secret")
    probed: list[str] = []

    def probe(url: str) -> str | None:
        probed.append(url)
        return None

    with App(toy_settings) as app:
        checks = {c.name: c for c in run_checks(app, probe=probe)}
    assert checks["price of toy-1"].ok
    assert checks["key TOYVID_API_KEY"].ok
    assert "toy-1" in checks["key TOYVID_API_KEY"].detail
    assert checks["endpoint https://toy.invalid/v1"].ok
    assert "https://toy.invalid/v1" in probed


def test_the_registry_builds_the_toy_model_and_an_agent_call_returns(
    toy_settings: Settings,
) -> None:
    config = provider_config(toy_settings, "toy-1", env={"TOYVID_API_KEY": "toy-secret"})
    model = ProviderRegistry({"toy-1": config}).model("toy-1")
    assert model.model_name == "toy-one"
    result = Agent(model).run_sync("hello")
    assert result.output == "toy says hi"


def test_built_in_run_facts_carry_no_token_rule(tmp_path: Path) -> None:
    """Models whose ids name their rule record the facts they did before families had one."""
    traffic = traffic_for(load_settings(tmp_path), live=False)
    for model in ("gemini-3-flash", "gpt-5.4", "qwen-3.7-plus", "qwen3-vl-30b-a3b"):
        found = traffic(model)
        assert found is not None
        assert "token_rule" not in found.facts()
    old = {"cache_ttl_s": None, "batchable": True, "frame_height": 480, "max_frames": 512}
    assert Traffic.from_facts(old).token_rule is None


ROOT = Path(__file__).resolve().parent.parent
BUILT_IN = "|".join(re.escape(name) for name in sorted(families()))
# A family compared with, or looked up by, a literal name, or an attribute looked up by a
# computed name: dispatch that belongs in a spec.
DISPATCH = re.compile(
    rf"""family\w*\s*(==|!=|\bin\b|\bnot in\b)\s*[(\[{{]?\s*["']|["']({BUILT_IN})["']\s*(==|!=)"""
    rf"""|getattr\([^)]*family|\.family\(\s*["']"""
    rf"""|getattr\([^,]+,\s*(f["']|[\w.]+\.replace\()"""
)


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(ROOT))
        for package in ("playlisteval", "agents", "policies", "store")
        for p in (ROOT / package).rglob("*.py")
    ),
)
def test_no_code_outside_tools_providers_dispatches_on_a_family_name(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    found = [line.strip() for line in text.splitlines() if DISPATCH.search(line)]
    assert not found, f"{path} dispatches on a provider family's name: {found!r}"


@pytest.mark.parametrize("path", ["playlisteval/app.py", "playlisteval/doctor.py"])
def test_the_composition_root_and_the_doctor_name_no_built_in_family(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    named = re.findall(rf"""["']({BUILT_IN})["']""", text)
    assert not named, f"{path} names built-in families {named!r}: read them from the spec"
