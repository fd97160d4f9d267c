"""Options that several commands take with the same meaning, each declared once (``--home`` is
:data:`playlisteval.cli.shell.HomeOption`). A command gives its own default:
``concurrency: ConcurrencyOption = None``.

Light on purpose, as :mod:`playlisteval.cli.shell`: typer and nothing of the workspace.
"""

from __future__ import annotations

from typing import Annotated

import typer

#: ``curate``, ``replay``, ``rehearse``, ``worker``, ``serve``: how many seeds are worked on at
#: once.
ConcurrencyOption = Annotated[int | None, typer.Option(help="Seeds in flight at once.")]

#: ``curate`` and ``demo``: the most seeds a new run takes.
MaxSeedsOption = Annotated[int | None, typer.Option(help="Curate at most this many seeds.")]

#: ``pairs`` and ``export``: the curation run they work on.
RunOption = Annotated[str | None, typer.Option(help="The run (default: the newest).")]

#: A command that prints a table, or the same facts as JSON for a script.
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
