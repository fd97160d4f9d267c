"""Runs as the CLI sees them: each use case in a module of its own, built from the parts the
composition root (``playlisteval.app.App``) hands it.

- :mod:`~playlisteval.runs.curation`: choose seeds, start a run (its definition recorded), resume
  one under its recorded definition (``--upgrade`` to change it), queue one for the fleet;
- :mod:`~playlisteval.runs.advice`: why a run's seeds stopped and what takes them further;
- :mod:`~playlisteval.runs.replay`: strict and counterfactual replay, the chain check;
- :mod:`~playlisteval.runs.rehearse`: a priced rehearsal in a scratch log;
- :mod:`~playlisteval.runs.audit`: a run's audit;
- :mod:`~playlisteval.runs.benchmark`: pair selection and export;
- :mod:`~playlisteval.runs.evaluation`: judge evaluation.
"""

from playlisteval.runs.advice import StopKind, resume_advice, resume_lines, stop_kinds
from playlisteval.runs.audit import audit, latest_run
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
from playlisteval.runs.rehearse import Rehearsal, paper_scale, rehearse
from playlisteval.runs.release import then_release
from playlisteval.runs.replay import ReplayReport, replay_strict, replayer, verify_store

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
