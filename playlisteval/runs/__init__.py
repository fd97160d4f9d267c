"""Runs as the CLI sees them: each use case in a module of its own, built from the parts the
composition root (``playlisteval.app.App``) hands it.

- :mod:`~playlisteval.runs.curation`: choose seeds, start a run (its definition recorded), resume
  one under its recorded definition (``--upgrade`` to change it), queue one for the fleet;
- :mod:`~playlisteval.runs.advice`: why a run's seeds stopped and what takes them further;
- :mod:`~playlisteval.runs.replay`: strict and counterfactual replay, the chain check;
- :mod:`~playlisteval.runs.rehearsing`: a priced rehearsal in a scratch log;
- :mod:`~playlisteval.runs.auditing`: a run's audit;
- :mod:`~playlisteval.runs.benchmark`: pair selection and export;
- :mod:`~playlisteval.runs.evaluation`: judge evaluation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playlisteval.runs.advice import StopKind, resume_advice, resume_lines, stop_kinds
    from playlisteval.runs.auditing import audit, latest_run
    from playlisteval.runs.benchmark import export, select_pairs
    from playlisteval.runs.curation import (
        check_prices,
        check_resumable,
        choose_seeds,
        curate,
        new_run_id,
        queue_fresh_seeds,
        resume,
        run_settings,
    )
    from playlisteval.runs.evaluation import DEFAULT_CONDITIONS, DEMO_CONDITIONS, evaluate
    from playlisteval.runs.rehearsing import Rehearsal, paper_scale, rehearse
    from playlisteval.runs.release import then_release
    from playlisteval.runs.replay import ReplayReport, replay_strict, replayer, verify_store

#: Each name of the package, by the module it lives in: imported when first used, so a command
#: that needs one use case (``status``, ``runs``) does not pay for the others' imports. No module
#: of the package is named as one of these (importing ``runs.audit`` would otherwise put the
#: module where the function ``runs.audit`` is looked for).
_LAZY: dict[str, str] = {
    "DEFAULT_CONDITIONS": "playlisteval.runs.evaluation",
    "DEMO_CONDITIONS": "playlisteval.runs.evaluation",
    "Rehearsal": "playlisteval.runs.rehearsing",
    "ReplayReport": "playlisteval.runs.replay",
    "StopKind": "playlisteval.runs.advice",
    "audit": "playlisteval.runs.auditing",
    "check_prices": "playlisteval.runs.curation",
    "check_resumable": "playlisteval.runs.curation",
    "choose_seeds": "playlisteval.runs.curation",
    "curate": "playlisteval.runs.curation",
    "evaluate": "playlisteval.runs.evaluation",
    "export": "playlisteval.runs.benchmark",
    "latest_run": "playlisteval.runs.auditing",
    "new_run_id": "playlisteval.runs.curation",
    "paper_scale": "playlisteval.runs.rehearsing",
    "queue_fresh_seeds": "playlisteval.runs.curation",
    "rehearse": "playlisteval.runs.rehearsing",
    "replay_strict": "playlisteval.runs.replay",
    "replayer": "playlisteval.runs.replay",
    "resume": "playlisteval.runs.curation",
    "resume_advice": "playlisteval.runs.advice",
    "resume_lines": "playlisteval.runs.advice",
    "run_settings": "playlisteval.runs.curation",
    "select_pairs": "playlisteval.runs.benchmark",
    "stop_kinds": "playlisteval.runs.advice",
    "then_release": "playlisteval.runs.release",
    "verify_store": "playlisteval.runs.replay",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_CONDITIONS",
    "DEMO_CONDITIONS",
    "Rehearsal",
    "ReplayReport",
    "StopKind",
    "audit",
    "check_prices",
    "check_resumable",
    "choose_seeds",
    "curate",
    "evaluate",
    "export",
    "latest_run",
    "new_run_id",
    "paper_scale",
    "queue_fresh_seeds",
    "rehearse",
    "replay_strict",
    "replayer",
    "resume",
    "resume_advice",
    "resume_lines",
    "run_settings",
    "select_pairs",
    "stop_kinds",
    "then_release",
    "verify_store",
]
