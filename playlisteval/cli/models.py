"""``models``: every model id the project knows, where it runs, what it costs, and the slots it
fills (:mod:`playlisteval.model_catalog` reads them from the project's own declarations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from playlisteval.cli.output import console
from playlisteval.cli.shell import HomeOption, open_app

if TYPE_CHECKING:
    from playlisteval.model_catalog import KnownModel, SlotDefault

commands = typer.Typer()


def _runs(model: KnownModel) -> str:
    """Where it runs, and for a keyed one whether its key is set (never the key)."""
    if model.key_env is None:
        return model.runs
    return f"{model.runs} ({model.key_env} {'set' if model.key_set else 'unset'})"


def _price(model: KnownModel) -> str:
    if model.input_per_mtok is None or model.output_per_mtok is None:
        return "none known"
    return f"{model.input_per_mtok} / {model.output_per_mtok}"


def _slots(model: KnownModel) -> str:
    """The slots it fills now (``*``: that slot's default), then those it is the default of
    but no longer fills (``(default)``)."""
    named = [f"{key}*" if key in model.default_of else key for key in model.fills]
    named += [f"{key} (default)" for key in model.default_of if key not in model.fills]
    return ", ".join(named) or "—"


def _light_table(title: str, caption: str | None = None) -> Table:
    """The two tables' style: a rule under the header only, no padding at the edges, so that
    the many columns fit a terminal."""
    return Table(
        title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )


def models_table(models: list[KnownModel], offline: bool) -> Table:
    """One row per known model: family, where it runs, price, context window, slots."""
    title = "Models this project knows"
    if offline:
        title += (
            " (this workspace runs offline: the offline provider plays every model but the "
            "real local ones, reported as offline-stand-in(ID))"
        )
    table = _light_table(
        title,
        caption="USD per million tokens, input / output; *: the slot's default; evaluation "
        "judge: any model can be one (eval --judge ID), these are the declared ones",
    )
    table.add_column("model", no_wrap=True)
    table.add_column("family", overflow="fold")
    table.add_column("runs on", overflow="fold")
    table.add_column("price", justify="right", overflow="fold")
    table.add_column("context", justify="right", no_wrap=True)
    table.add_column("slots", overflow="fold")
    for model in models:
        table.add_row(
            escape(model.model_id) + (" [dim](paper)[/]" if model.paper_judge else ""),
            escape(model.family or "—"),
            escape(_runs(model)),
            _price(model),
            f"{model.context_window:,}" if model.context_window else "—",
            escape(_slots(model)),
        )
    return table


def slots_table(slots: list[SlotDefault]) -> Table:
    """Each model slot: its settings key, the roles it casts, its default and its value now."""
    table = _light_table(escape("Model slots ([models] in playlisteval.toml)"))
    table.add_column("slot", no_wrap=True)
    table.add_column("roles", overflow="fold")
    table.add_column("default", overflow="fold")
    table.add_column("now", overflow="fold")
    for slot in slots:
        now = "= default" if slot.configured == slot.default else ", ".join(slot.configured)
        table.add_row(
            escape(slot.key + ("" if slot.paper else " (gate package)")),
            escape(", ".join(slot.roles)),
            escape(", ".join(slot.default)),
            escape(now),
        )
    return table


@commands.command("models")
def models(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the list as JSON (one object: models, slots).")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Every model id the project knows — the slots' defaults, the paper's judges, the priced
    and configured models, the offline judges — with its provider family, where it runs
    (service, vLLM server, real local, offline harness), its price, its context window and the
    slots it fills, each slot's default marked; then every slot with its default and value now."""
    from playlisteval.model_catalog import known_models, slot_defaults
    from playlisteval.settings import SETTINGS_FILE
    from tools.providers.judges import PAPER_JUDGE_COUNT, PAPER_JUDGES

    with open_app(home, create=True) as app_:
        settings = app_.settings
        found = known_models(settings, app_.prices())
        slots = slot_defaults(settings)
        offline = settings.curation.offline
    if as_json:
        data = {
            "offline": offline,
            "models": [m.to_json() for m in found],
            "slots": [
                {"key": s.key, "roles": s.roles, "default": s.default, "now": s.configured}
                for s in slots
            ],
            "paper_judges": {"named": list(PAPER_JUDGES), "evaluated": PAPER_JUDGE_COUNT},
        }
        typer.echo(json.dumps(data, indent=2))
        return
    console.print(models_table(found, offline))
    console.print(slots_table(slots))
    console.print(
        escape(
            f"(paper): a judge the paper evaluates; it names {len(PAPER_JUDGES)} of its "
            f"{PAPER_JUDGE_COUNT} in its text, those listed. Add a model: its endpoint under "
            '[providers.models."ID"] and its price under [budget.price_overrides."ID"] in '
            f"{Path(settings.home).expanduser().resolve() / SETTINGS_FILE}."
        ),
        soft_wrap=True,
    )
