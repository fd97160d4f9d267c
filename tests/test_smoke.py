"""``playlisteval smoke``: one minimal call per configured role and model, against the fake
Gemini, OpenAI, DashScope and vLLM servers through the real SDKs, each call in the event log.

The command is run as the CLI will run it: a Typer app that ``register`` adds it to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from agents.smoke import smoke_targets
from playlisteval import cli, smoke
from playlisteval.app import App, role_models
from playlisteval.settings import SETTINGS_FILE, load_settings
from store.events import CallFailed, CallRecorded, CallRefused, CallReserved, usd_to_micros
from tests.fakes_openai import openai_compatible_harness
from tests.fakes_providers import Harness
from tests.live_fakes import Fakes, running_fakes
from tools.contracts.roles import ROLES

KEYS = {
    "GEMINI_API_KEY": "gem-SECRET-7c1e9a3f5b2d",
    "OPENAI_API_KEY": "oai-SECRET-3d5f7b9a1c4e",
    "DASHSCOPE_API_KEY": "dsc-SECRET-8e2a4c6f0b1d",
}
GENERATOR = "gemini-3-flash-preview"


class LiveFakes:
    """The three vendors' fakes and a vLLM fake (the difficulty judges' server)."""

    def __init__(self, fakes: Fakes, vllm: Harness) -> None:
        self.fakes = fakes
        self.vllm = vllm

    def all(self) -> list[Harness]:
        """Every fake."""
        return [*self.fakes.all(), self.vllm]

    def model_requests(self) -> int:
        """Model requests the fakes received, all together."""
        return sum(len(h.model_requests()) for h in self.all())


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveFakes]:
    with ExitStack() as stack:
        vendors = stack.enter_context(running_fakes(monkeypatch, KEYS))
        vllm = stack.enter_context(openai_compatible_harness())
        yield LiveFakes(vendors, vllm)


def _point_at(home: Path, fakes: LiveFakes) -> None:
    """The workspace's settings send every family to its fake."""
    blocks = {
        **fakes.fakes.provider_settings(),
        "openai_compatible": {"base_url": f"{fakes.vllm.server.base_url}/v1"},
    }
    lines = [f'\n[providers.{name}]\nbase_url = "{b["base_url"]}"\n' for name, b in blocks.items()]
    settings = home / SETTINGS_FILE
    settings.write_text(settings.read_text() + "".join(lines))


def _invoke(*args: str) -> Result:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A group, as the real CLI is (one command alone would become the root)."""

    smoke.register(app)
    return CliRunner().invoke(app, ["smoke", *args])


def _smoke_events(home: Path) -> dict[str, list[object]]:
    """The events of every smoke stream of the workspace, by stream."""
    with App(load_settings(home)) as app:
        stored = [s for s in app.events.read_all() if s.stream.startswith("smoke-")]
    out: dict[str, list[object]] = {}
    for row in stored:
        out.setdefault(row.stream, []).append(row.event())
    return out


def _lines(output: str, mark: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(mark)]


@pytest.mark.usefixtures("allow_model_requests")
def test_every_role_and_model_passes_live_and_each_call_is_recorded(
    workspace: Path, fakes: LiveFakes
) -> None:
    _point_at(workspace, fakes)
    settings = load_settings(workspace)
    targets = smoke_targets(role_models(settings), settings.models.difficulty_judges)
    result = _invoke("--live", "--budget", "0.50", "--home", str(workspace))

    assert result.exit_code == 0, result.output
    passed = _lines(result.output, "PASS")
    assert len(passed) == len(targets)
    assert not _lines(result.output, "FAIL")
    for target in targets:
        assert any(f" {target.role} {target.model}:" in line for line in passed), target
    # Every list role's models and the difficulty judges are among them.
    assert {t.model for t in targets if t.role == "pair_judge"} == set(
        settings.models.difficulty_judges
    )
    assert {t.role for t in targets} == set(ROLES)

    # One request per pair reached the fakes, and each is one CallRecorded in one new stream.
    assert fakes.model_requests() == len(targets)
    ((stream, events),) = _smoke_events(workspace).items()
    recorded = [e for e in events if isinstance(e, CallRecorded)]
    assert {(e.role, e.model) for e in recorded} == {(t.role, t.model) for t in targets}
    assert len(recorded) == len(targets)
    assert not any(e.offline for e in recorded)
    assert not [e for e in events if isinstance(e, CallFailed | CallRefused)]
    spent = sum(e.cost_micros for e in recorded)
    assert 0 < spent <= usd_to_micros(0.50)
    assert f"{len(targets)} passed, 0 failed, 0 skipped: spent" in result.output
    assert stream in result.output

    # A second smoke is a new run with a stream of its own.
    again = _invoke("--live", "--role", "transcript_matcher", "--home", str(workspace))
    assert again.exit_code == 0, again.output
    assert len(_smoke_events(workspace)) == 2


@pytest.mark.usefixtures("allow_model_requests")
def test_refused_pairs_fail_with_the_providers_message_and_the_others_pass(
    workspace: Path, fakes: LiveFakes
) -> None:
    _point_at(workspace, fakes)
    # Gemini no longer serves the generators' model; DashScope's quota is spent for one call
    # (the sufficiency check, the first qwen call in role order).
    fakes.fakes.gemini.state.served = tuple(  # type: ignore[attr-defined]
        m
        for m in fakes.fakes.gemini.state.served
        if m != GENERATOR  # type: ignore[attr-defined]
    )
    fakes.fakes.dashscope.fake.refuse_next("Throttling.AllocationQuota")  # type: ignore[attr-defined]
    roles = ("phase1_generator", "textual_ranker", "sufficiency", "visual_ranker")
    args = [a for r in roles for a in ("--role", r)]
    result = _invoke("--live", *args, "--home", str(workspace))

    assert result.exit_code == smoke.EXIT_FAILED == 1, result.output
    failed = _lines(result.output, "FAIL")
    assert len(failed) == 2
    assert failed[0].startswith(f"FAIL phase1_generator {GENERATOR}:")
    assert failed[1].startswith("FAIL sufficiency qwen-3.7-plus:")
    passed = _lines(result.output, "PASS")
    assert {line.split(":")[0] for line in passed} == {
        "PASS textual_ranker gemini-3.1-pro-preview",
        "PASS textual_ranker gpt-5.4",
        "PASS visual_ranker qwen-3.7-plus",
    }
    # The providers' own words, on the line under each failure.
    lines = result.output.splitlines()
    under = {lines[lines.index(f) + 1] for f in failed}
    assert any("404" in u and GENERATOR in u and "NOT_FOUND" in u for u in under), under
    assert any("Allocated quota exceeded" in u for u in under), under
    assert "2 failed" in result.output

    ((_, events),) = _smoke_events(workspace).items()
    failures = {(e.role, e.model) for e in events if isinstance(e, CallFailed)}
    assert failures == {("phase1_generator", GENERATOR), ("sufficiency", "qwen-3.7-plus")}
    assert len([e for e in events if isinstance(e, CallRecorded)]) == 3
    for key in KEYS.values():
        assert key not in result.output


@pytest.mark.usefixtures("allow_model_requests")
def test_a_budget_too_small_for_a_call_skips_it_without_calling(
    workspace: Path, fakes: LiveFakes
) -> None:
    _point_at(workspace, fakes)
    # The generator's worst case (16k output tokens, two clips) is far above 2 cents; the
    # matcher's (2k output tokens of gpt-5.4-mini, text) fits under it.
    cap = 0.02
    result = _invoke(
        "--live",
        "--budget",
        str(cap),
        "--role",
        "phase1_generator",
        "--role",
        "transcript_matcher",
        "--home",
        str(workspace),
    )

    assert result.exit_code == smoke.EXIT_FIX == 2, result.output
    (skipped,) = _lines(result.output, "SKIP")
    assert skipped.startswith(f"SKIP phase1_generator {GENERATOR}: ")
    lines = result.output.splitlines()
    assert lines[lines.index(skipped) + 1].strip().startswith("budget: budget exhausted")
    assert len(_lines(result.output, "PASS")) == 1
    assert "--budget above 0.02" in result.output

    # The skipped call never reached Gemini; the log says it was refused, and why.
    assert len(fakes.fakes.gemini.model_requests()) == 0
    assert fakes.model_requests() == 1
    ((_, events),) = _smoke_events(workspace).items()
    (refused,) = [e for e in events if isinstance(e, CallRefused)]
    assert refused.role == "phase1_generator"
    assert refused.needed_micros > usd_to_micros(cap)
    reserved = [e for e in events if isinstance(e, CallReserved)]
    assert [e.role for e in reserved] == ["transcript_matcher"]


def test_without_live_the_offline_provider_answers_and_says_so(workspace: Path) -> None:
    result = _invoke("--role", "parametric_answerer", "--home", str(workspace))

    assert result.exit_code == 0, result.output
    assert result.output.startswith("offline: the offline provider answers every call")
    assert len(_lines(result.output, "PASS")) == 2  # one per parametric pair's answerer
    ((_, events),) = _smoke_events(workspace).items()
    recorded = [e for e in events if isinstance(e, CallRecorded)]
    assert len(recorded) == 2
    assert all(e.offline for e in recorded)
    assert "2 passed, 0 failed, 0 skipped: priced at" in result.output


def test_an_empty_workspace_is_one_line_saying_to_add_and_index(tmp_path: Path) -> None:
    result = _invoke("--home", str(tmp_path / "empty"))

    assert result.exit_code == cli.EXIT_FIX, result.output
    (error,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "no indexed segment" in error
    assert "playlisteval add" in error
    assert "playlisteval index" in error


def test_an_unknown_role_or_a_bad_budget_is_refused_before_any_call(workspace: Path) -> None:
    unknown = _invoke("--role", "narrator", "--home", str(workspace))
    assert unknown.exit_code == cli.EXIT_FIX
    assert "unknown role(s) ['narrator']" in unknown.output
    negative = _invoke("--budget", "-1", "--home", str(workspace))
    assert negative.exit_code == cli.EXIT_FIX
    assert "--budget must be 0 or more" in negative.output
    assert _smoke_events(workspace) == {}


def test_the_exit_codes_are_the_clis() -> None:
    """The shell cannot import ``cli`` (cli imports it): its codes must agree by value."""
    assert smoke.EXIT_FIX == cli.EXIT_FIX
    assert smoke.EXIT_FAILED not in (0, cli.EXIT_FIX, cli.EXIT_BUSY, cli.EXIT_TAMPERED)


def test_the_playlisteval_cli_offers_smoke(workspace: Path) -> None:
    """`playlisteval smoke` is a command of the real CLI, not only of a test's app."""
    result = CliRunner().invoke(cli.app, ["smoke", "--home", str(workspace), "--role", "nope"])
    assert result.exit_code == 2, result.output
    assert "nope" in result.output
