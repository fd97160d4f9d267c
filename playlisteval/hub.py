"""Publishing an export on the Hugging Face Hub: the folder as a *dataset* repo.

``push_export`` uploads a finished export folder (:mod:`playlisteval.export`) with
``huggingface_hub`` (``HfApi.create_repo`` then ``HfApi.upload_folder``) to the Hub that
``HF_ENDPOINT`` names (huggingface.co when unset). The token comes from where the Hub's own tools
look: the one given, else ``HF_TOKEN``, else the token ``hf auth login`` saved
(``huggingface_hub.get_token``). The repo then mirrors the folder: files an earlier push left
that this export no longer has are deleted in the same commit.

Each way a push can fail is its own exception with its own exit code, so a script can tell them
apart; none of them touches the local export, which was written before the push began.

The CLI keeps ``huggingface_hub`` offline so that no model is ever downloaded at run time
(``HF_HUB_OFFLINE=1``); a push is the user asking to publish, so its own requests go out while
it runs (:func:`_online`), and nothing else does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import ConfigError, PlaylistEvalError

if TYPE_CHECKING:
    from huggingface_hub import HfApi

EXIT_HUB_NO_TOKEN = 11  # no token given, in HF_TOKEN or saved by `hf auth login`
EXIT_HUB_DENIED = 12  # the Hub refused the token (401) or its rights (403)
EXIT_HUB_REPO_TAKEN = 13  # the repo exists and holds something other than an export
EXIT_HUB_UNREACHABLE = 14  # the Hub could not be reached (network down, wrong HF_ENDPOINT)
EXIT_HUB_REFUSED = 15  # the Hub answered with any other error: the line quotes it

#: A repo id as the Hub takes it: ``[namespace/]name``, each part letters, digits, ``-``, ``_``
#: and ``.``, no ``--`` or ``..``, not starting or ending with ``-`` or ``.``, at most 96
#: characters (``huggingface_hub.utils._validators.REPO_ID_REGEX`` and ``validate_repo_id``).
_REPO_ID = re.compile(r"^(?:[\w\-.]+/)?[\w\-.]+$")


class HubError(PlaylistEvalError):
    """A push to the Hub failed; ``exit_code`` says how. The local export is untouched."""

    exit_code = EXIT_HUB_REFUSED


class HubNoToken(HubError):
    """No Hugging Face token could be found."""

    exit_code = EXIT_HUB_NO_TOKEN


class HubDenied(HubError):
    """The Hub refused the token (invalid: 401) or what it may do (403)."""

    exit_code = EXIT_HUB_DENIED


class HubRepoTaken(HubError):
    """The repo exists and holds something other than a PlaylistEval export."""

    exit_code = EXIT_HUB_REPO_TAKEN


class HubUnreachable(HubError):
    """No answer from the Hub: the network is down or ``HF_ENDPOINT`` points nowhere."""

    exit_code = EXIT_HUB_UNREACHABLE


@dataclass(frozen=True)
class Published:
    """What a push made: the repo, its page, the commit and how many files it holds."""

    repo_id: str
    url: str
    commit: str
    files: int


def check_repo_id(repo_id: str) -> None:
    """Refuse a repo id the Hub would refuse, before anything is exported or sent
    (``huggingface_hub.utils.validate_repo_id`` is the rule; it is applied again by the SDK)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils._validators import validate_repo_id

    try:
        if not _REPO_ID.match(repo_id):
            raise HFValidationError("it must be `NAME` or `OWNER/NAME`")
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        first = str(exc).splitlines()[0].rstrip(".")
        raise ConfigError(
            f"--push-to-hub {repo_id!r} is not a Hub repo id ({first}): give OWNER/NAME, "
            "e.g. 'my-team/playlisteval-cooking'"
        ) from exc


def find_token(token: str | None) -> str:
    """The token to push with: the one given, else ``HF_TOKEN``, else the saved login."""
    from huggingface_hub import get_token

    found = token or get_token()
    if not found:
        raise HubNoToken(
            "no Hugging Face token: give --token, set HF_TOKEN, or run `hf auth login` "
            "(a token with write access)"
        )
    return found


@contextmanager
def _online() -> Iterator[None]:
    """``huggingface_hub`` allowed to make requests for the span of a push, whatever the
    CLI's offline default; its sessions are made anew on the way in and out, since the offline
    adapter is mounted when a session is made (``utils/_http.py``, ``_default_backend_factory``)."""
    from huggingface_hub import constants
    from huggingface_hub.utils._http import reset_sessions

    was = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    reset_sessions()
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was
        reset_sessions()


def _check_holds_an_export(api: HfApi, repo_id: str) -> None:
    """Refuse to push into a repo holding something other than an export (an earlier export,
    with its ``benchmark.json``, is replaced; a new repo holds at most ``.gitattributes``)."""
    files = api.list_repo_files(repo_id, repo_type="dataset")
    others = sorted(f for f in files if f != ".gitattributes")
    if others and "benchmark.json" not in others:
        shown = ", ".join(others[:3]) + (", …" if len(others) > 3 else "")
        raise HubRepoTaken(
            f"the Hub dataset {repo_id!r} exists and holds something other than a PlaylistEval "
            f"export ({shown}): choose another repo name, or empty that repo first"
        )


def push_export(
    folder: Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
) -> Published:
    """Upload the export ``folder`` as the Hub dataset ``repo_id`` (made when missing,
    ``private`` if asked) in one commit, and say what was made. ``endpoint`` defaults to
    ``HF_ENDPOINT`` as it is when called. Raises a :class:`HubError` subclass (each with its
    ``exit_code``) or ConfigError for a bad repo id; the folder is only read."""
    check_repo_id(repo_id)
    found = find_token(token)
    with _online():
        return _push(Path(folder), repo_id, found, private, endpoint)


def _push(folder: Path, repo_id: str, token: str, private: bool, endpoint: str | None) -> Published:
    """The push itself, with the SDK's errors turned into ours."""
    import requests
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    base = endpoint or os.environ.get("HF_ENDPOINT") or None
    api = HfApi(endpoint=base.rstrip("/") if base else None, token=token)
    where = api.endpoint
    try:
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        _check_holds_an_export(api, url.repo_id)
        commit = api.upload_folder(
            folder_path=folder,
            repo_id=url.repo_id,
            repo_type="dataset",
            commit_message=f"PlaylistEval benchmark export ({folder.name})",
            delete_patterns="*",  # mirror the folder; .gitattributes is never deleted
        )
        files = api.list_repo_files(url.repo_id, repo_type="dataset")
    except HfHubHTTPError as exc:
        raise _http_error(exc, repo_id, where) from exc
    except (requests.ConnectionError, requests.Timeout, OfflineModeIsEnabled) as exc:
        raise HubUnreachable(
            f"cannot reach the Hub at {where} ({type(exc).__name__}): check the network or "
            "HF_ENDPOINT, then run the export again"
        ) from exc
    except ValueError as exc:  # the SDK's word on a malformed answer or README metadata
        raise HubError(f"the Hub at {where} refused the push: {_first_line(exc)}") from exc
    return Published(url.repo_id, str(url), commit.oid, len(files))


def _first_line(exc: BaseException) -> str:
    """The first non-empty line of an error's text."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), repr(exc))


def _http_error(exc: Exception, repo_id: str, where: str) -> HubError:
    """The Hub's HTTP refusal as one of ours: 401/403 say the token, anything else is quoted
    with the server's own message (``HfHubHTTPError.server_message``)."""
    from huggingface_hub.errors import HfHubHTTPError

    assert isinstance(exc, HfHubHTTPError)
    status = exc.response.status_code if exc.response is not None else None
    said = (exc.server_message or "").strip().splitlines()
    server = f": {said[0]}" if said else ""
    if status == 401:
        return HubDenied(
            f"the Hub at {where} refused the token (401{server}): give a valid token "
            "(--token, HF_TOKEN or `hf auth login`)"
        )
    if status == 403:
        return HubDenied(
            f"the token may not write to {repo_id!r} on {where} (403{server}): use a token "
            "with write access to that namespace, or push to your own"
        )
    return HubError(f"the Hub at {where} refused the push to {repo_id!r} ({status}{server})")
