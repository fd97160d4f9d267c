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

#: ``pairs`` and ``export``: how many pairs the run's selection samples per domain.
PerDomainOption = Annotated[
    int | None,
    typer.Option(
        help="Pairs sampled per domain when the run's pairs are selected (by `export` only "
        "when the run has none yet; default: pairs.pairs_per_domain)."
    ),
]

#: ``pairs`` and ``export``: the cap of the selection's difficulty-gate calls.
PairsBudgetOption = Annotated[
    float | None,
    typer.Option(
        help="Total cap of the run's difficulty-gate calls (USD) when its pairs are selected, "
        "earlier ones included (default: the cap it was last given, else budget.pairs_usd)."
    ),
]

#: A command that prints a table, or the same facts as JSON for a script.
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
