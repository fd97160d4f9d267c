"""A loopback stand-in of the Hugging Face Hub's HTTP API, as strict as the Hub where it matters.

A real HTTP server on 127.0.0.1 (``http.server``) that ``huggingface_hub`` and ``datasets`` are
pointed at with ``HF_ENDPOINT``. It implements exactly the endpoints the installed SDK calls to
create a dataset repo, upload a folder into it and read it back (``huggingface_hub`` 0.36,
``datasets`` 4.x), and refuses what the Hub refuses; each rule names the SDK code that shows the
Hub's behaviour. Anything else is answered 404 and recorded in ``unknown``, so a test can assert
that the SDK called nothing this stand-in does not know.

Paths of the SDK source below are relative to ``huggingface_hub/`` in site-packages.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

#: ``hf_raise_for_status`` (utils/_http.py) tells an invalid token from a missing repo by this
#: exact ``X-Error-Message``; the Hub's body says the same (huggingface_hub issue #3368).
INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
#: What the Hub answers a write without a token (``create_repo`` with no login).
NO_CREDENTIALS = "Invalid username or password."
#: The Hub's default ``.gitattributes`` of a new repo (abridged): these files go to LFS, which is
#: how ``preupload`` decides ``uploadMode`` (``_commit_api._fetch_upload_modes``).
GITATTRIBUTES = "".join(
    f"*.{ext} filter=lfs diff=lfs merge=lfs -text\n"
    for ext in ("parquet", "arrow", "mp4", "jpg", "jpeg", "png", "zip", "gz")
)
LFS_SUFFIXES = tuple(f".{line.split()[0][2:]}" for line in GITATTRIBUTES.splitlines())
#: Files above 10 MB are LFS on the Hub whatever their name (the Hub's upload docs).
LFS_THRESHOLD = 10 * 1024 * 1024
#: A repo name as the Hub takes it (``utils/_validators.py``: ``REPO_ID_REGEX`` and the ``--``
#: / ``..`` rules of ``validate_repo_id``), at most 96 characters.
REPO_NAME = re.compile(r"^(?!-)(?!.*--)(?!.*\.\.)[\w\-.]{1,96}(?<![-.])$")
REPO_PATH = r"(?P<repo>[\w\-.]+/[\w\-.]+)"


def git_blob_oid(data: bytes) -> str:
    """A file's git blob id, as the Hub gives ``oid`` for a regular file (and as the SDK
    computes ``_local_oid``: ``utils/sha.py`` ``git_hash``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """A dataset repo: who owns it, whether private, its files on ``main`` and its commits."""

    owner: str
    private: bool
    files: dict[str, bytes] = field(
        default_factory=lambda: {".gitattributes": GITATTRIBUTES.encode()}
    )
    lfs: set[str] = field(default_factory=set)
    commits: list[str] = field(default_factory=list)

    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    @property
    def sha(self) -> str:
        return self.commits[-1]

    def record(self, sha: str) -> None:
        """``sha`` is the new head of ``main``; what it holds stays readable by that sha."""
        self.commits.append(sha)
        self.snapshots[sha] = Snapshot(sha, dict(self.files), set(self.lfs))

    def at(self, rev: str | None) -> Snapshot:
        """The repo at ``rev``: ``main`` or one of its commits, as the Hub resolves both (the
        SDK and ``datasets`` pin a read to the commit sha ``X-Repo-Commit`` gave); anything else
        is ``RevisionNotFound`` (utils/_http.py)."""
        rev = unquote(rev or "main")
        found = self.snapshots.get(self.sha if rev == "main" else rev)
        if found is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return found


@dataclass(frozen=True)
class Snapshot:
    """A repo's files at one commit."""

    sha: str
    files: dict[str, bytes]
    lfs: set[str]


class HubError(Exception):
    """An HTTP refusal: status, the JSON body's ``error`` and the Hub's ``X-Error-*`` headers."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def not_found(repo_id: str) -> HubError:
    """The Hub's answer for a repo that does not exist or that the caller may not see:
    ``X-Error-Code: RepoNotFound`` is what makes ``hf_raise_for_status`` raise
    ``RepositoryNotFoundError`` (utils/_http.py)."""
    return HubError(404, f"Repository not found: {repo_id}", "RepoNotFound")


class HubStandIn:
    """The Hub's state (tokens, repos, LFS objects) and its rules; :class:`_Handler` speaks
    HTTP for it. ``tokens`` maps each valid token to its user (who owns that namespace)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = dict(tokens)
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.calls: list[tuple[str, str]] = []
        self.unknown: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.url = ""

    # -- who is asking -------------------------------------------------------------------------
    def user(self, headers: Any, *, required: bool) -> str | None:
        """The caller: a present but unknown token is refused everywhere (401, the message
        ``hf_raise_for_status`` keys on); no token is refused where the Hub needs one."""
        auth = headers.get("Authorization") or ""
        if not auth:
            if required:
                raise HubError(401, NO_CREDENTIALS)
            return None
        token = auth.removeprefix("Bearer ").strip()
        if not auth.startswith("Bearer ") or token not in self.tokens:
            raise HubError(401, INVALID_CREDENTIALS)
        return self.tokens[token]

    def readable(self, repo_id: str, user: str | None) -> Repo:
        """A repo the caller may read; a private one is as missing to anyone else."""
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and user != repo.owner):
            raise not_found(repo_id)
        return repo

    def writable(self, repo_id: str, user: str | None) -> Repo:
        """A repo the caller may write: missing → 404 RepoNotFound (``create_commit`` on a
        missing repo: ``_CREATE_COMMIT_NO_REPO_ERROR_MESSAGE`` in hf_api.py), another's → 403."""
        repo = self.readable(repo_id, user)
        if user != repo.owner:
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    @staticmethod
    def revision(rev: str) -> None:
        """Writes go to ``main`` only here (no branches): any other is ``RevisionNotFound``."""
        if unquote(rev) != "main":
            raise HubError(404, f"Invalid rev id: {unquote(rev)}", "RevisionNotFound")

    # -- create ----------------------------------------------------------------------------------
    def create_repo(self, user: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``POST /api/repos/create`` (hf_api.py ``create_repo``): ``name``, ``organization``,
        ``type``, ``private``. A bad name is 400, another's namespace 403, an existing repo 409
        with its ``url`` (which ``create_repo(exist_ok=True)`` reads back)."""
        name, namespace = body.get("name"), body.get("organization") or user
        if body.get("type") != "dataset":
            raise HubError(400, f"this stand-in holds dataset repos only, not {body.get('type')!r}")
        if not isinstance(name, str) or not REPO_NAME.match(name):
            raise HubError(400, f"Invalid repo name: {name!r}")
        if namespace != user:
            raise HubError(
                403,
                f'You don\'t have the rights to create a dataset under the namespace "{namespace}"',
            )
        repo_id = f"{namespace}/{name}"
        url = f"{self.url}/datasets/{repo_id}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo", "url": url}
        repo = Repo(owner=user, private=bool(body.get("private")))
        repo.record(hashlib.sha1(f"init {repo_id}".encode()).hexdigest())
        self.repos[repo_id] = repo
        return 200, {"url": url, "name": repo_id}

    # -- upload ----------------------------------------------------------------------------------
    def preupload(self, repo: Repo, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/datasets/{repo}/preupload/{rev}`` (``_commit_api._fetch_upload_modes``):
        each file's ``uploadMode`` (``lfs`` by .gitattributes or size, else ``regular``),
        ``shouldIgnore`` and the ``oid`` of the file already there (sha256 for LFS, the git blob
        id otherwise), which the SDK compares with ``_local_oid`` to skip unchanged files."""
        out = []
        for f in body["files"]:
            path, size = f["path"], int(f["size"])
            base64.b64decode(f["sample"], validate=True)
            lfs = path.endswith(LFS_SUFFIXES) or size >= LFS_THRESHOLD
            have = repo.files.get(path)
            oid = None
            if have is not None:
                oid = hashlib.sha256(have).hexdigest() if path in repo.lfs else git_blob_oid(have)
            out.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": oid,
                }
            )
        return {"files": out, "commitOid": repo.sha}

    def lfs_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /datasets/{repo}.git/info/lfs/objects/batch`` (``lfs.post_lfs_batch_info``,
        the git-lfs batch API): the server picks one of the offered transfers (``basic`` here,
        never ``xet``); an object already stored gets no ``actions`` (``_upload_lfs_files``
        skips it), others an ``upload`` href and a ``verify`` href."""
        if body.get("operation") != "upload" or "basic" not in body.get("transfers", []):
            raise HubError(400, "only basic uploads are supported")
        objects = []
        for obj in body["objects"]:
            oid, size = obj["oid"], int(obj["size"])
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if self.lfs_objects.get(oid) is None:
                entry["actions"] = {
                    "upload": {"href": f"{self.url}/_standin/lfs/{oid}", "header": {}},
                    "verify": {"href": f"{self.url}/_standin/lfs-verify", "header": {}},
                }
            objects.append(entry)
        return {"transfer": "basic", "objects": objects}

    def lfs_put(self, oid: str, data: bytes) -> None:
        """The upload href (``lfs._upload_single_part``: a PUT of the bytes, like S3): the bytes
        must hash to the oid they were announced under."""
        if hashlib.sha256(data).hexdigest() != oid:
            raise HubError(400, "content does not match its sha256 oid")
        self.lfs_objects[oid] = data

    def lfs_verify(self, body: dict[str, Any]) -> None:
        """The verify href (``lfs.lfs_upload`` step 3): the object is there, of that size."""
        data = self.lfs_objects.get(body.get("oid", ""))
        if data is None or len(data) != body.get("size"):
            raise HubError(404, "Object not found")

    def commit(self, repo_id: str, repo: Repo, ndjson: bytes) -> dict[str, Any]:
        """``POST /api/datasets/{repo}/commit/{rev}`` with ``application/x-ndjson``
        (hf_api.py ``create_commit``, ``_commit_api._prepare_commit_payload``): a ``header``
        line first, then ``file`` (base64), ``lfsFile`` (an uploaded sha256 oid),
        ``deletedFile`` / ``deletedFolder`` lines. An lfsFile whose object was never uploaded
        is refused, and the whole commit with it."""
        lines = [json.loads(line) for line in ndjson.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header" or "summary" not in lines[0]["value"]:
            raise HubError(400, "The first line of a commit must be its header")
        files, lfs = dict(repo.files), set(repo.lfs)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            path = value["path"]
            if key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, f"unknown encoding for {path}")
                files[path] = base64.b64decode(value["content"], validate=True)
                lfs.discard(path)
            elif key == "lfsFile":
                data = self.lfs_objects.get(value["oid"])
                if data is None or value.get("algo") != "sha256":
                    raise HubError(
                        400,
                        "Your push was rejected because an LFS pointer pointed to a file that "
                        f"does not exist: {path}",
                    )
                files[path] = data
                lfs.add(path)
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                del files[path]
            elif key == "deletedFolder":
                for name in [n for n in files if n.startswith(path.rstrip("/") + "/")]:
                    del files[name]
            else:
                raise HubError(400, f"unknown commit operation {key!r}")
        sha = hashlib.sha1((repo.sha + ndjson.decode()).encode()).hexdigest()
        repo.files, repo.lfs = files, lfs & set(files)
        repo.record(sha)
        return {
            "success": True,
            "commitOid": sha,
            "commitUrl": f"{self.url}/datasets/{repo_id}/commit/{sha}",
            "hookOutput": "",
        }

    # -- read back -------------------------------------------------------------------------------
    def entry(self, repo: Snapshot, path: str) -> dict[str, Any] | None:
        """A path as the tree and paths-info endpoints list it (``hf_api.RepoFile`` /
        ``RepoFolder``): a file with its blob ``oid`` and, for LFS, ``lfs.oid`` (sha256); a
        folder when some file lies under it."""
        if path in repo.files:
            data = repo.files[path]
            out: dict[str, Any] = {
                "type": "file",
                "oid": git_blob_oid(data),
                "size": len(data),
                "path": path,
            }
            if path in repo.lfs:
                out["lfs"] = {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                }
            return out
        prefix = path.rstrip("/") + "/"
        if path == "" or any(name.startswith(prefix) for name in repo.files):
            digest = hashlib.sha1(prefix.encode() + repo.sha.encode()).hexdigest()
            return {"type": "directory", "oid": digest, "size": 0, "path": path}
        return None

    def tree(self, repo: Snapshot, path: str, recursive: bool) -> list[dict[str, Any]]:
        """``GET /api/datasets/{repo}/tree/{rev}/{path}`` (``list_repo_tree``): the entries
        under ``path``, all of them when ``recursive``; a missing path is EntryNotFound."""
        path = path.strip("/")
        if path and self.entry(repo, path) is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        prefix = f"{path}/" if path else ""
        names: set[str] = set()
        for name in repo.files:
            if not name.startswith(prefix):
                continue
            parts = name[len(prefix) :].split("/")
            depth = len(parts) if recursive else 1
            for n in range(1, depth + 1):
                names.add(prefix + "/".join(parts[:n]))
        entries = [self.entry(repo, name) for name in sorted(names)]
        return [e for e in entries if e is not None]

    def dataset_info(self, repo_id: str, owner: Repo, repo: Snapshot) -> dict[str, Any]:
        """``GET /api/datasets/{repo}[/revision/{rev}]`` (``dataset_info``, whose DatasetInfo
        reads ``id``, ``sha``, ``private``, ``siblings`` and leaves the rest optional)."""
        return {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "author": owner.owner,
            "sha": repo.sha,
            "private": owner.private,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-12-01T00:00:00.000Z",
            "createdAt": "2026-12-01T00:00:00.000Z",
            "siblings": [{"rfilename": name} for name in sorted(repo.files)],
        }


_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"^/api/repos/create$"), "create"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate_yaml"),
    ("POST", re.compile(rf"^/api/datasets/{REPO_PATH}/preupload/(?P<rev>[^/]+)$"), "preupload"),
    ("POST", re.compile(rf"^/api/datasets/{REPO_PATH}/commit/(?P<rev>[^/]+)$"), "commit"),
    ("POST", re.compile(rf"^/datasets/{REPO_PATH}\.git/info/lfs/objects/batch$"), "lfs_batch"),
    ("PUT", re.compile(r"^/_standin/lfs/(?P<oid>[0-9a-f]{64})$"), "lfs_put"),
    ("POST", re.compile(r"^/_standin/lfs-verify$"), "lfs_verify"),
    ("GET", re.compile(rf"^/api/datasets/{REPO_PATH}(?:/revision/(?P<rev>[^/]+))?$"), "info"),
    (
        "GET",
        re.compile(rf"^/api/datasets/{REPO_PATH}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$"),
        "tree",
    ),
    ("POST", re.compile(rf"^/api/datasets/{REPO_PATH}/paths-info/(?P<rev>[^/]+)$"), "paths_info"),
    ("GET", re.compile(rf"^/datasets/{REPO_PATH}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    (
        "HEAD",
        re.compile(rf"^/datasets/{REPO_PATH}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"),
        "resolve",
    ),
]


class _Handler(BaseHTTPRequestHandler):
    """HTTP for :class:`HubStandIn`: routes, bodies, and the Hub's error shape (JSON
    ``{"error": ...}`` plus ``X-Error-Message`` and, where the Hub sets one, ``X-Error-Code``:
    what ``hf_raise_for_status`` and ``_format`` in utils/_http.py read)."""

    protocol_version = "HTTP/1.1"
    hub: HubStandIn
    raw_body = b""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``hub.calls``."""

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, value: Any, content_type: str = "application/json") -> None:
        self._send(status, json.dumps(value).encode(), {"Content-Type": content_type})

    def _body(self) -> bytes:
        return self.raw_body

    def _dispatch(self) -> None:
        # The body is read before any refusal: left unread, it would be taken for the next
        # request on this kept-alive connection.
        self.raw_body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        hub = self.hub
        for method, pattern, name in _ROUTES:
            match = pattern.match(url.path)
            if match and method == self.command:
                with hub.lock:
                    hub.calls.append((self.command, url.path))
                try:
                    getattr(self, f"_{name}")(**match.groupdict(), query=parse_qs(url.query))
                except HubError as exc:
                    headers = {"Content-Type": "application/json", "X-Error-Message": exc.message}
                    if exc.code:
                        headers["X-Error-Code"] = exc.code
                    self._send(exc.status, json.dumps({"error": exc.message}).encode(), headers)
                return
        with hub.lock:
            hub.unknown.append((self.command, self.path))
        self._json(404, {"error": "Sorry, we can't find the page you are looking for."})

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _dispatch  # noqa: N815 - the base calls them so

    # -- routes ------------------------------------------------------------------------------------
    def _create(self, query: dict[str, list[str]]) -> None:
        user = self.hub.user(self.headers, required=True)
        assert user is not None
        with self.hub.lock:
            status, body = self.hub.create_repo(user, json.loads(self._body()))
        if status == 409:
            raise_with = {"Content-Type": "application/json", "X-Error-Message": body["error"]}
            self._send(409, json.dumps(body).encode(), raise_with)
            return
        self._json(status, body)

    def _validate_yaml(self, query: dict[str, list[str]]) -> None:
        """``POST /api/validate-yaml`` (hf_api.py ``_validate_yaml``, before any upload): the
        README's front matter must be a YAML mapping; errors come as ``{"errors": [...]}``."""
        self.hub.user(self.headers, required=False)
        content = json.loads(self._body())["content"]
        errors: list[dict[str, str]] = []
        if content.startswith("---\n"):
            try:
                meta = yaml.safe_load(content.split("\n---\n", 1)[0].removeprefix("---\n"))
                if not isinstance(meta, dict):
                    errors.append({"message": "metadata must be a mapping"})
            except yaml.YAMLError as exc:
                errors.append({"message": f"Invalid YAML: {exc}"})
        self._json(400 if errors else 200, {"errors": errors, "warnings": []})

    def _writable(self, repo: str, rev: str) -> Repo:
        user = self.hub.user(self.headers, required=True)
        with self.hub.lock:
            found = self.hub.writable(repo, user)
        self.hub.revision(rev)
        return found

    def _preupload(self, repo: str, rev: str, query: dict[str, list[str]]) -> None:
        found = self._writable(repo, rev)
        with self.hub.lock:
            self._json(200, self.hub.preupload(found, json.loads(self._body())))

    def _commit(self, repo: str, rev: str, query: dict[str, list[str]]) -> None:
        found = self._writable(repo, rev)
        if self.headers.get("Content-Type") != "application/x-ndjson":
            raise HubError(400, "a commit is sent as application/x-ndjson")
        with self.hub.lock:
            self._json(200, self.hub.commit(repo, found, self._body()))

    def _lfs_batch(self, repo: str, query: dict[str, list[str]]) -> None:
        body = json.loads(self._body())
        self._writable(repo, body.get("ref", {}).get("name", "main"))
        if self.headers.get("Accept") != "application/vnd.git-lfs+json":
            raise HubError(406, "the LFS batch API answers application/vnd.git-lfs+json")
        with self.hub.lock:
            self._json(200, self.hub.lfs_batch(body), "application/vnd.git-lfs+json")

    def _lfs_put(self, oid: str, query: dict[str, list[str]]) -> None:
        data = self._body()
        with self.hub.lock:
            self.hub.lfs_put(oid, data)
        self._send(200, b"", {"ETag": f'"{oid}"'})

    def _lfs_verify(self, query: dict[str, list[str]]) -> None:
        self.hub.user(self.headers, required=True)
        with self.hub.lock:
            self.hub.lfs_verify(json.loads(self._body()))
        self._json(200, {})

    def _readable(self, repo: str, rev: str | None) -> Snapshot:
        user = self.hub.user(self.headers, required=False)
        with self.hub.lock:
            return self.hub.readable(repo, user).at(rev)

    def _info(self, repo: str, rev: str | None, query: dict[str, list[str]]) -> None:
        found = self._readable(repo, rev)
        with self.hub.lock:
            self._json(200, self.hub.dataset_info(repo, self.hub.repos[repo], found))

    def _tree(self, repo: str, rev: str, path: str | None, query: dict[str, list[str]]) -> None:
        found = self._readable(repo, rev)
        recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
        with self.hub.lock:
            self._json(200, self.hub.tree(found, unquote(path or ""), recursive))

    def _paths_info(self, repo: str, rev: str, query: dict[str, list[str]]) -> None:
        """``POST /api/datasets/{repo}/paths-info/{rev}`` (``get_paths_info``): form-encoded
        ``paths``; the ones that exist come back, the others are left out."""
        found = self._readable(repo, rev)
        form = parse_qs(self._body().decode())
        with self.hub.lock:
            entries = [self.hub.entry(found, p.strip("/")) for p in form.get("paths", [])]
        self._json(200, [e for e in entries if e is not None])

    def _resolve(self, repo: str, rev: str, path: str, query: dict[str, list[str]]) -> None:
        """``GET``/``HEAD /datasets/{repo}/resolve/{rev}/{path}`` (file_download.py
        ``get_hf_file_metadata`` reads ``X-Repo-Commit``, ``ETag`` and the size; the file
        system reads byte ranges): the file, or EntryNotFound."""
        found = self._readable(repo, rev)
        path = unquote(path)
        with self.hub.lock:
            data = found.files.get(path)
            sha, lfs = found.sha, path in found.lfs
        if data is None:
            raise HubError(404, "Entry not found", "EntryNotFound")
        etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_oid(data)
        headers = {
            "X-Repo-Commit": sha,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        ranged = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range") or "")
        if ranged is None:
            self._send(200, data, headers)
            return
        start = int(ranged.group(1))
        end = min(int(ranged.group(2)) if ranged.group(2) else len(data) - 1, len(data) - 1)
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        self._send(206, data[start : end + 1], headers)


@contextmanager
def serve(tokens: dict[str, str]) -> Iterator[HubStandIn]:
    """The stand-in, listening on 127.0.0.1 (a free port) until the block ends; its base URL,
    for ``HF_ENDPOINT``, is ``hub.url``. The socket is bound before this yields."""
    hub = HubStandIn(tokens)
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
