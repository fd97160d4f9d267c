"""Who may do what in the UI: invite links, annotator and owner cookies and answer forms, each
signed with HMAC-SHA256 under the workspace's secret (``<home>/ui_secret``) and bound to one
benchmark, so none can be forged or carried to another benchmark. The same secret draws the
letter each annotator is shown a pair's intended answer under, so no one can work it out from
their name and the pair's id.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from playlisteval.ui.annotations import ForgedAnnotator
from playlisteval.ui.benchmark import Benchmark
from store.annotation_events import Shown
from store.errors import ConfigError

COOKIE = "playlisteval_annotator"


OWNER_COOKIE = "playlisteval_owner"


SECRET_FILE = "ui_secret"


def workspace_secret(home: Path) -> bytes:
    """The workspace's signing key, made once (``<home>/ui_secret``, readable by its owner
    only) and read back after that."""
    path = Path(home) / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            key = path.read_bytes().strip()
        except OSError as exc:  # a folder (or something unreadable) where the key goes
            raise ConfigError(
                f"{str(path)!r} is not a readable key file ({exc.strerror or exc}): move it "
                "away and a new key is made (signed-in annotators then enter their names again)"
            ) from exc
        if len(key) < 32:
            raise ConfigError(
                f"{str(path)!r} holds too short a key ({len(key)} bytes); delete it and a new "
                "one is made (signed-in annotators then enter their names again)"
            ) from None
        return key
    key = secrets.token_hex(32).encode()
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def _same(given: str, expected: str) -> bool:
    """Whether ``given`` (from a request: any characters) is ``expected``, in constant time
    (``compare_digest`` refuses non-ASCII text with a TypeError: compared as UTF-8 instead)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


@dataclass(frozen=True)
class Signer:
    """HMAC-SHA256 signatures for invite links, annotator cookies and answer forms, each bound
    to one benchmark (``scope``, its annotations stream): what one benchmark's UI signs opens
    nothing in another's, even on one workspace and one host."""

    key: bytes
    scope: str = ""

    def _mac(self, *parts: str) -> str:
        message = "|".join((self.scope, *parts)).encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def _named(self, purpose: str, name: str) -> str:
        encoded = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
        return f"{encoded}.{self._mac(purpose, name)}"

    def _name(self, purpose: str, value: str) -> str | None:
        """The name ``value`` carries when this key signed it for ``purpose``, else None."""
        encoded, _, mac = value.partition(".")
        try:
            name = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        return name if _same(mac, self._mac(purpose, name)) else None

    def invite(self, name: str) -> str:
        """The invite token of annotator ``name``: whoever holds it joins as ``name``."""
        return self._named("invite", name)

    def invited(self, token: str) -> str:
        """The name an invite token carries; :class:`ForgedAnnotator` unless this server made
        it for this benchmark."""
        name = self._name("invite", token)
        if name is None:
            raise ForgedAnnotator(
                "the invite link is not one this UI made for this benchmark; ask whoever runs "
                "the UI for yours (`playlisteval ui BENCH --invite NAME` prints it)"
            )
        return name

    def cookie(self, name: str) -> str:
        """The cookie value that names ``name``."""
        return self._named("annotator", name)

    def annotator(self, cookie: str) -> str:
        """The name a cookie value carries; :class:`ForgedAnnotator` unless this key signed it."""
        name = self._name("annotator", cookie)
        if name is None:
            raise ForgedAnnotator("the annotator cookie was not signed by this server")
        return name

    def owner(self) -> str:
        """The owner token of this benchmark's UI: whoever holds it reads every label."""
        return self._mac("owner")

    def owner_cookie(self) -> str:
        """The cookie value the owner link sets."""
        return self._mac("owner-cookie")

    def is_owner_cookie(self, value: str) -> bool:
        """Whether ``value`` is the owner cookie this key signs for this benchmark."""
        return _same(value, self.owner_cookie())

    def check_owner(self, token: str) -> None:
        """:class:`ForgedAnnotator` unless ``token`` is this benchmark's owner token."""
        if not _same(token, self.owner()):
            raise ForgedAnnotator(
                "the owner link is not one this UI made for this benchmark; `playlisteval ui "
                "BENCH` prints it when it starts"
            )

    def chosen_shown_as(self, annotator: str, pair_id: str) -> Shown:
        """The letter ``annotator`` is first shown the intended answer of ``pair_id`` under:
        random across pairs and annotators, always the same for one (annotator, pair), and
        unknown to whoever lacks this key (a hash of the names alone would tell an annotator
        the intended answer before they chose)."""
        return "A" if int(self._mac("order", annotator, pair_id)[0], 16) % 2 == 0 else "B"

    def form_token(self, annotator: str, pair_id: str) -> str:
        """The token an answer form for (annotator, pair) carries."""
        return self._mac("form", annotator, pair_id)

    def check_form(self, annotator: str, pair_id: str, token: str) -> None:
        """:class:`ForgedAnnotator` unless ``token`` was made for this annotator and pair."""
        if not _same(token, self.form_token(annotator, pair_id)):
            raise ForgedAnnotator(
                f"the form for pair {pair_id!r} was not issued to annotator {annotator!r}"
            )


def cookie_name(benchmark: Benchmark) -> str:
    """The annotator cookie of one benchmark's UI (UIs on one host share cookies across ports)."""
    return f"{COOKIE}_{benchmark.content_sha256[:12]}"


def owner_cookie_name(benchmark: Benchmark) -> str:
    """The owner cookie of one benchmark's UI."""
    return f"{OWNER_COOKIE}_{benchmark.content_sha256[:12]}"


def invite_path(signer: Signer, name: str) -> str:
    """The path of annotator ``name``'s invite link."""
    return f"/join?invite={quote(signer.invite(name), safe='')}"


def owner_path(signer: Signer) -> str:
    """The path of the owner link: it opens the results and every label to whoever runs the
    UI (the same link after a restart, like the invite links)."""
    return f"/owner?token={signer.owner()}"
