"""``playlisteval doctor`` on a live run asks each provider for the models it serves (through
the real SDKs, against the fakes) and fails, naming it, on a configured id it does not list."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.doctor import Check, run_checks
from playlisteval.settings import SETTINGS_FILE, load_settings
from tests.fakes_dashscope import DashScopeFake, DashScopeHarness
from tests.fakes_gemini import SERVED_MODELS, GeminiHarness
from tests.fakes_openai import OpenAIHarness
from tests.live_fakes import Fakes, running_fakes

pytestmark = pytest.mark.usefixtures("allow_model_requests")

KEYS = {
    "GEMINI_API_KEY": "gemini-doctor-key",
    "OPENAI_API_KEY": "sk-doctor-key",
    "DASHSCOPE_API_KEY": "sk-doctor-dashscope",
}
# The default configuration's live models, as the checks name them.
DEFAULT_MODEL_CHECKS = {
    "model gemini-3-flash-preview at gemini",
    "model gemini-3.1-pro-preview at gemini",
    "model gpt-5.4 at openai",
    "model gpt-5.4-mini at openai",
    "model qwen-3.7-plus at dashscope",
}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    with running_fakes(monkeypatch, KEYS) as running:
        yield running


def _without_pro(fakes: Fakes) -> None:
    """The Gemini fake stops listing (and serving) gemini-3.1-pro-preview."""
    state = cast(GeminiHarness, fakes.gemini).state
    state.served = tuple(m for m in SERVED_MODELS if m != "gemini-3.1-pro-preview")


def _dashscope(fakes: Fakes) -> DashScopeFake:
    return cast(DashScopeHarness, fakes.dashscope).fake


def _checks(workspace: Path, fakes: Fakes) -> dict[str, Check]:
    settings = load_settings(
        workspace, curation={"offline": False}, providers=fakes.provider_settings()
    )
    with App(settings) as app:
        return {c.name: c for c in run_checks(app, probe=lambda _url: None)}


def test_every_default_model_listed_by_its_provider_passes(workspace: Path, fakes: Fakes) -> None:
    checks = _checks(workspace, fakes)
    model_checks = {n for n in checks if n.startswith("model ")}
    assert model_checks == DEFAULT_MODEL_CHECKS
    for name in model_checks:
        assert checks[name].ok, checks[name]
    assert "'qwen3.7-plus'" in checks["model qwen-3.7-plus at dashscope"].detail
    assert all(c.ok for c in checks.values()), [c for c in checks.values() if not c.ok]
    # One model-list call per family and endpoint, through each SDK.
    assert len(fakes.gemini.server.seen("GET", "/v1beta/models")) == 1
    assert len(fakes.openai.server.seen("GET", "/v1/models")) == 1
    assert len(fakes.dashscope.server.seen("GET", "/api/v1/models")) == 1


def test_an_id_a_provider_does_not_list_fails_naming_it_and_what_it_lists(
    workspace: Path, fakes: Fakes
) -> None:
    _without_pro(fakes)
    _dashscope(fakes).models = {"qwen3.6-plus", "qwen3.5-plus", "qwen-vl-max"}
    checks = _checks(workspace, fakes)
    failed = {n for n, c in checks.items() if not c.ok}
    assert failed == {"model gemini-3.1-pro-preview at gemini", "model qwen-3.7-plus at dashscope"}
    gemini = checks["model gemini-3.1-pro-preview at gemini"]
    assert "'gemini-3.1-pro-preview'" in gemini.detail
    assert "not listed" in gemini.detail
    assert "gemini-2.5-pro" in gemini.detail  # what it does list
    assert "models.textual_undetectability" in gemini.fix
    assert 'providers.models."gemini-3.1-pro-preview".model_name' in gemini.fix
    qwen = checks["model qwen-3.7-plus at dashscope"]
    assert "'qwen3.7-plus'" in qwen.detail
    # The closest ids it lists, nearest first.
    assert qwen.detail.endswith("it lists qwen3.6-plus, qwen3.5-plus, qwen-vl-max")
    assert "models.sufficiency or models.visual_detectability" in qwen.fix


def test_the_openai_fake_lists_its_configured_ids_in_openais_shape(
    workspace: Path, fakes: Fakes
) -> None:
    cast(OpenAIHarness, fakes.openai).fake.served_models = ("gpt-5.4",)
    checks = _checks(workspace, fakes)
    assert checks["model gpt-5.4 at openai"].ok
    mini = checks["model gpt-5.4-mini at openai"]
    assert not mini.ok
    assert mini.detail.endswith("it lists gpt-5.4")


def test_a_failing_list_call_is_a_failing_check_with_the_providers_message(
    workspace: Path, fakes: Fakes
) -> None:
    _dashscope(fakes).api_key = "sk-another-key"
    checks = _checks(workspace, fakes)
    listing = checks["models at dashscope"]
    assert not listing.ok
    assert "Invalid API-key provided." in listing.detail
    assert "DASHSCOPE_API_KEY" in listing.fix
    assert "model qwen-3.7-plus at dashscope" not in checks
    assert checks["model gpt-5.4 at openai"].ok


def test_the_cli_exits_non_zero_naming_the_missing_id(workspace: Path, fakes: Fakes) -> None:
    _without_pro(fakes)
    providers = fakes.provider_settings()
    toml = "\n[curation]\noffline = false\n" + "".join(
        f'\n[providers.{family}]\nbase_url = "{block["base_url"]}"\n'
        for family, block in providers.items()
    )
    settings_file = workspace / SETTINGS_FILE
    settings_file.write_text(settings_file.read_text() + toml)
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(workspace)])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if "FAIL" in line]
    assert len(lines) == 1, result.output
    assert "model gemini-3.1-pro-preview at gemini" in lines[0]
    assert "ok   model gpt-5.4 at openai" in result.output


def test_a_judge_configured_only_for_evaluation_is_checked_with_its_servers_context_window(
    workspace: Path, fakes: Fakes
) -> None:
    """A judge named nowhere but under ``providers.models`` (one for ``eval --judge``) is
    checked like the roles' models: its price, that the server serves its id, and its
    ``context_window`` setting against the ``max_model_len`` the vLLM server reports."""
    from tests.fakes_openai import openai_compatible_harness

    with openai_compatible_harness(max_model_len=16384) as vllm:
        judge = {
            "family": "openai-compatible",
            "base_url": f"{vllm.server.base_url}/v1",
            "model_name": "Qwen/Qwen2.5-VL-7B-Instruct",
            "context_window": 32768,
        }
        settings = load_settings(
            workspace,
            curation={"offline": False},
            providers={**fakes.provider_settings(), "models": {"my-qwen-judge": judge}},
            budget={
                "price_overrides": {
                    "my-qwen-judge": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
                }
            },
        )
        with App(settings) as app:
            checks = {c.name: c for c in run_checks(app, probe=lambda _url: None)}
    assert checks["price of my-qwen-judge"].ok
    assert checks["model my-qwen-judge at openai-compatible"].ok
    window = checks["context window of my-qwen-judge"]
    assert not window.ok
    assert window.detail == "setting 32,768 tokens, server 16,384"
    assert window.fix == 'set providers.models."my-qwen-judge".context_window = 16384 (or unset it)'
