"""``budget reconcile``'s use case: a workspace's ledger beside one provider bill.

The bill is read by :mod:`policies.bills`, the comparison is :mod:`policies.reconcile`'s; what
this module adds is what only the workspace knows: the log's call events (all of them, or one
curation run's) and, for each model id, which provider family serves it and the name that
provider knows it by (the settings' ``[providers.models."ID"]``, else the id's prefix).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from playlisteval.app import App, endpoint
from playlisteval.settings import Settings
from policies.bills import Bill, Provider, detect_provider, parse_bill, zone_named
from policies.reconcile import Reconciliation, ledger_days, reconcile
from store.errors import ConfigError
from store.events import pairs_stream, run_stream, seed_stream
from store.eventstore import StoredEvent
from store.ledger import ledger_types


def read_bill(path: Path, provider: Provider | None = None, zone: str | None = None) -> Bill:
    """The bill in ``path`` (its provider told from its shape unless given; ``zone``: the time
    zone its days are counted in, default the provider's own); one ConfigError line for a file
    that cannot be read or is not of the shape."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"no bill at {str(path)!r}: give the path of the exported file") from None
    except IsADirectoryError:
        raise ConfigError(f"{str(path)!r} is a folder: give the exported bill file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}): give the bill "
            "as the provider exports it (JSON or CSV)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the bill {str(path)!r}: {exc.strerror}") from None
    found = provider or detect_provider(text, str(path))
    return parse_bill(text, str(path), found, zone_named(zone) if zone else None)


def call_events(app: App, run: str | None = None) -> list[StoredEvent]:
    """The log's call events in seq order: all of them, or (``run``) those of one curation
    run's seeds and pair selection; ConfigError for a run the log does not hold."""
    events = app.events.read_all(types=sorted(ledger_types()))
    if run is None:
        return events
    if not app.events.stream_version(run_stream(run)):
        raise ConfigError(f"no run {run!r} in this log: `playlisteval runs` lists them")
    own = {run_stream(run), pairs_stream(run)}
    seeds = seed_stream(run, "")
    return [e for e in events if e.stream in own or e.stream.startswith(seeds)]


def served_by(
    settings: Settings, models: Iterable[str]
) -> dict[str, tuple[str | None, Sequence[str]]]:
    """Each model id → the provider family serving it (None: not known) and the names that
    provider knows it by (ours, and the settings' ``model_name`` where one is set)."""
    found: dict[str, tuple[str | None, Sequence[str]]] = {}
    for model in sorted(set(models) | set(settings.providers.models)):
        try:
            family, configured = endpoint(settings, model)
        except ConfigError:
            found[model] = (None, ())
            continue
        names = (model, configured.model_name) if configured.model_name else (model,)
        found[model] = (family.name, names)
    return found


def reconcile_bill(
    app: App, bill: Bill, *, tolerance_micros: int, run: str | None = None
) -> Reconciliation:
    """The workspace's ledger (or one run's) beside ``bill``."""
    ledger = ledger_days(call_events(app, run), bill.zone)
    models: Mapping[str, tuple[str | None, Sequence[str]]] = served_by(
        app.settings, {model for _day, model in ledger.cells}
    )
    return reconcile(ledger, bill, models, tolerance_micros)
