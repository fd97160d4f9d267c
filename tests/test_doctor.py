"""``playlisteval doctor`` says what is missing and what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from playlisteval.app import App
from playlisteval.cli import app as cli_app
from playlisteval.doctor import probe_url, run_checks
from playlisteval.settings import SETTINGS_FILE, load_settings

# These tests drive the adapters against local fake servers (see conftest).
pytestmark = pytest.mark.usefixtures("allow_model_requests")


def test_a_ready_workspace_passes_every_check(workspace: Path) -> None:
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(workspace)])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.output
    assert "price of gemini-3-flash" in result.output


def test_an_unpriced_model_and_a_missing_key_fail_with_what_to_do(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with App(load_settings(workspace, models={"sufficiency": "mystery-vl-9000"})) as app:
        checks = {c.name: c for c in run_checks(app)}
    assert not checks["price of mystery-vl-9000"].ok
    assert "price_overrides" in checks["price of mystery-vl-9000"].fix

    with App(load_settings(workspace, curation={"offline": False})) as app:
        checks = {c.name: c for c in run_checks(app, probe=lambda _url: None)}
    assert not checks["key OPENAI_API_KEY"].ok
    assert checks["key OPENAI_API_KEY"].fix.startswith("export OPENAI_API_KEY=")
    assert "gpt-5.4" in checks["key OPENAI_API_KEY"].detail


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_live_endpoints_are_probed_without_keys_and_an_unreachable_one_says_what_to_do(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes_providers import FakeProviderServer, serve_provider

    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(name, f"doctor-key-{name}")
    with serve_provider(FakeProviderServer()) as server:
        dead = f"http://127.0.0.1:{_closed_port()}/api/v1"
        settings = load_settings(
            workspace,
            curation={"offline": False},
            providers={
                "gemini": {"base_url": server.base_url},
                "openai": {"base_url": f"{server.base_url}/v1"},
                "dashscope": {"base_url": dead},
            },
        )
        with App(settings) as app:
            checks = {c.name: c for c in run_checks(app)}
        # The probes (the model-list calls, which carry the key, go to …/models).
        probed = [r for r in server.seen("GET") if not r.path.split("?")[0].endswith("/models")]
    assert checks[f"endpoint {server.base_url}"].ok
    assert checks[f"endpoint {server.base_url}/v1"].ok
    assert not checks[f"endpoint {dead}"].ok
    assert "ConnectError" in checks[f"endpoint {dead}"].detail
    assert "base_url" in checks[f"endpoint {dead}"].fix
    # The probes carry no key.
    assert probed
    for request in probed:
        assert not any("doctor-key" in v for v in request.headers.values())
    # The difficulty judges' vLLM endpoint is not configured, and not needed to curate.
    judge = checks["endpoint of qwen3-vl-30b-a3b"]
    assert judge.ok
    assert "not needed" in judge.detail


def test_an_empty_workspace_says_to_index_first(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(tmp_path / "empty")])
    assert result.exit_code == 1
    assert "playlisteval index" in " ".join(result.output.split())


def _real_local(local_path: str, **more: object) -> dict[str, object]:
    return {
        "providers": {"models": {"tiny-real": {"family": "real-local", "local_path": local_path}}},
        **more,
    }


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_real_local_gguf_file_or_its_folder_passes_and_needs_no_price_row(
    workspace: Path, tmp_path: Path, where: str
) -> None:
    gguf = tmp_path / "models" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")  # checked for what it is, not loaded
    local_path = str(gguf if where == "file" else gguf.parent)
    with App(load_settings(workspace, **_real_local(local_path))) as app:
        checks = {c.name: c for c in run_checks(app, probe=lambda _url: None)}
    assert checks["local model of tiny-real"].ok, checks["local model of tiny-real"]
    assert "real local model" in checks["local model of tiny-real"].detail
    assert checks["price of tiny-real"].ok
    assert "0.0 / 0.0" in checks["price of tiny-real"].detail


@pytest.mark.parametrize("offline", [True, False])
def test_a_real_local_model_that_is_not_there_fails_offline_too(
    workspace: Path, offline: bool
) -> None:
    """A real local model is served in offline runs as well, so an offline workspace does not
    excuse its missing file (another local family's folder is needed only live)."""
    settings = load_settings(
        workspace, **_real_local("/models/nowhere.gguf", curation={"offline": offline})
    )
    with App(settings) as app:
        checks = {c.name: c for c in run_checks(app, probe=lambda _url: None)}
    check = checks["local model of tiny-real"]
    assert not check.ok
    assert "neither a .gguf file" in check.detail
    assert "qwen2.5-coder-1.5b-instruct" in check.fix


# -- the hostile walk of step 22 (issue 41): what the doctor passed and should not have --------


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consoles wide enough that rich never folds a long path inside a word."""
    from playlisteval import cli

    for console in (cli.console, cli.err_console):
        monkeypatch.setattr(console, "_width", 1000)


def _doctor(workspace: Path, settings: str = "") -> tuple[int, str]:
    """``playlisteval doctor`` on ``workspace`` with ``settings`` added to its file: (exit code,
    the output as one line of words)."""
    if settings:
        with (workspace / SETTINGS_FILE).open("a", encoding="utf-8") as file:
            file.write("\n" + settings)
    result = CliRunner().invoke(cli_app, ["doctor", "--home", str(workspace)])
    assert "Traceback" not in result.output
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.usefixtures("wide")
def test_a_log_key_other_users_may_read_fails_saying_how_to_close_it(workspace: Path) -> None:
    """Whoever reads the chain key can write a log that checks out: a key file of mode 0644
    fails, naming the file and the chmod that closes it."""
    with App(load_settings(workspace)) as app:
        app.events.last_seq()  # the key is there (made on first use)
        key = app.log_key_path()
    key.chmod(0o644)
    code, said = _doctor(workspace)
    assert code == 1, said
    assert f"FAIL log key: {key} may be read or written by other users (mode 0644)" in said
    assert f"→ chmod 600 {key}" in said
    key.chmod(0o600)
    code, said = _doctor(workspace)
    assert code == 0, said
    assert f"ok log key: {key}, mode 0600" in said


@pytest.mark.usefixtures("wide")
def test_a_text_file_named_gguf_fails_as_no_gguf_file(workspace: Path, tmp_path: Path) -> None:
    """A real-local judge's ``local_path`` is checked for GGUF's magic bytes, not its name."""
    fake = tmp_path / "judge.gguf"
    fake.write_text("a shopping list\n", encoding="utf-8")
    code, said = _doctor(
        workspace, f'[providers.models."tiny-real"]\nfamily = "real-local"\nlocal_path = "{fake}"\n'
    )
    assert code == 1, said
    assert (
        f"FAIL local model of tiny-real: {str(fake)!r} is not a GGUF file (it begins b'a sh', "
        "not b'GGUF')"
    ) in said


@pytest.mark.usefixtures("wide")
def test_a_qdrant_server_that_does_not_answer_fails_as_unreachable(workspace: Path) -> None:
    """The index on a Qdrant server is probed (any HTTP answer is one): a server that is down
    fails, saying so and what to do; one that answers passes."""
    from tests.fakes_providers import FakeProviderServer, serve_provider

    dead = f"http://127.0.0.1:{_closed_port()}"
    code, said = _doctor(workspace, f'[vectors]\nbackend = "qdrant-server"\nurl = "{dead}"\n')
    assert code == 1, said
    assert f"FAIL vector index: Qdrant server {dead} is unreachable: ConnectError" in said
    assert "→ start the Qdrant server, or fix vectors.url in playlisteval.toml" in said
    with serve_provider(FakeProviderServer()) as server:
        answering = load_settings(workspace, vectors={"url": server.base_url})
        with App(answering) as app:
            checks = {c.name: c for c in run_checks(app, probe=probe_url)}
    assert checks["vector index"].ok, checks["vector index"]
    assert checks["vector index"].detail == f"Qdrant server {server.base_url} reachable"
