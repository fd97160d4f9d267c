"""Who answered each judgment, from the evaluation's log: live providers, the offline provider
(a harness, never evidence of model quality), or not known — per judge and for the whole report.
A judge whose calls a real model run on this machine answered (the ``real-local`` family) is
marked so (:data:`REAL_LOCAL_LABEL`) wherever the report names who answered, never as the
offline harness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from playlisteval.report.load import evaluation_json
from policies.judging import JudgmentRecord
from store.answers import real_local_response
from tools.providers.judges import OFFLINE_JUDGES, is_stand_in
from tools.providers.specs.local_llm import REAL_LOCAL_LABEL

if TYPE_CHECKING:
    from store.eventstore import EventStore


OFFLINE_NOTE = (
    "Offline provider: a deterministic harness that exercises the pipeline; "
    "these numbers are not evidence of model quality."
)


REAL_BESIDE_OFFLINE_NOTE = (
    "Judges marked offline provider are a deterministic harness, not evidence of model quality; "
    "those marked real local model are real models run on this machine."
)


UNKNOWN_NOTE = (
    "Not known whether the judges answered live or through the offline provider (the log was "
    "not read); an offline answer is a harness, not evidence of model quality."
)


Source = Literal["offline", "live", "mixed", "unknown"]


@dataclass(frozen=True)
class AnsweredCall:
    """Who answered one recorded judgment call, as the evaluation's log says: the priced model
    id, the provider id the response names (``provider:model`` as the provider reported it),
    whether the offline provider answered, when, and whether a real local model did."""

    model: str
    answered_as: str
    offline: bool
    recorded_at: datetime
    real_local: bool = False


def answered_calls(events: EventStore, eval_dirs: Sequence[Path]) -> dict[str, AnsweredCall]:
    """Request key → who answered it, from each evaluation's stream ``eval-<id>`` (its id read
    from ``evaluation.json``); a call served again from the log keeps its first answer."""
    from agents.evaluation import eval_stream

    found: dict[str, AnsweredCall] = {}
    for directory in eval_dirs:
        evaluation_id = evaluation_json(directory).get("evaluation_id")
        if not evaluation_id:
            continue
        for stored in events.read_stream(eval_stream(str(evaluation_id))):
            if stored.type != "CallRecorded" or stored.data.get("replayed"):
                continue
            data = stored.data
            raw = data.get("response")
            response: dict[str, Any] = raw if isinstance(raw, dict) else {}
            model_name = str(response.get("model_name") or data.get("model", "?"))
            provider = response.get("provider_name")
            found.setdefault(
                str(data.get("key", "")),
                AnsweredCall(
                    model=str(data.get("model", "?")),
                    answered_as=f"{provider}:{model_name}" if provider else model_name,
                    offline=bool(data.get("offline")),
                    recorded_at=stored.recorded_at,
                    real_local=real_local_response(response),
                ),
            )
    return found


@dataclass(frozen=True)
class JudgeSource:
    """Who answered one judge's judgments, as far as the log read says."""

    judge: str
    answered_as: tuple[str, ...]  # provider ids from the log
    mode: Source  # offline, live, mixed (some calls each way) or unknown
    missing: int  # records whose call the log read does not hold
    real_local: bool = False  # a real model run on this machine answered every call read

    @property
    def label(self) -> str:
        """Who answered, in words: :data:`REAL_LOCAL_LABEL` for a real local model, else the
        mode's (:data:`MODE_TEXT`)."""
        return REAL_LOCAL_LABEL if self.real_local else MODE_TEXT[self.mode]


def judge_sources(
    records: Sequence[JudgmentRecord], calls: Mapping[str, AnsweredCall] | None
) -> dict[str, JudgeSource]:
    """Per judge: the provider ids that answered it and whether live or offline."""
    by_judge: dict[str, list[JudgmentRecord]] = {}
    for r in records:
        by_judge.setdefault(r.judge, []).append(r)
    sources = {}
    for judge, items in sorted(by_judge.items()):
        answered = [calls.get(r.call_key) for r in items] if calls is not None else []
        known = [a for a in answered if a is not None]
        # A real local model's call is its own answer, whatever mode its run was in.
        flags = {a.offline and not a.real_local for a in known}
        mode: Source
        if len(flags) == 2:
            mode = "mixed"
        elif judge in OFFLINE_JUDGES or is_stand_in(judge):
            mode = "offline"  # an offline judge exists only in the offline provider
        elif known and len(known) == len(items):
            mode = "offline" if flags == {True} else "live"
        else:
            mode = "unknown"
        sources[judge] = JudgeSource(
            judge=judge,
            answered_as=tuple(sorted({a.answered_as for a in known})),
            mode=mode,
            missing=len(items) - len(known),
            real_local=bool(known) and all(a.real_local for a in known),
        )
    return sources


def overall_source(sources: Mapping[str, JudgeSource]) -> Source:
    """The whole report's source: unknown if any judge's is, mixed if they differ."""
    modes = {s.mode for s in sources.values()}
    if "unknown" in modes:
        return "unknown"
    if len(modes) == 1:
        return modes.pop()
    return "mixed"


MODE_TEXT: dict[Source, str] = {
    "offline": "offline provider",
    "live": "live",
    "mixed": "partly offline provider, partly live",
    "unknown": "not known",
}


def source_sentence(source: Source, sources: Mapping[str, JudgeSource]) -> str:
    """The banner sentence that says who answered (and that offline is a harness), and which
    judges are real models run on this machine."""
    real = [s.judge for s in sources.values() if s.real_local]
    if not real:
        return _mode_sentence(source, sources)
    said = f"Real models: {', '.join(real)} ({REAL_LOCAL_LABEL}, run on this machine)."
    if source == "mixed":
        offline = ", ".join(s.judge for s in sources.values() if s.mode != "live")
        return (
            f"Mixed evaluation: {offline} answered offline, in whole or in part. "
            f"{REAL_BESIDE_OFFLINE_NOTE} {said}"
        )
    return f"{_mode_sentence(source, sources)} {said}"


def _mode_sentence(source: Source, sources: Mapping[str, JudgeSource]) -> str:
    if source == "offline":
        return "Offline evaluation. " + OFFLINE_NOTE
    if source == "live":
        return "Live evaluation: every judgment was answered by the provider named beside it."
    if source == "mixed":
        offline = ", ".join(s.judge for s in sources.values() if s.mode != "live")
        return f"Mixed evaluation: {offline} answered offline, in whole or in part. " + OFFLINE_NOTE
    unknown = ", ".join(s.judge for s in sources.values() if s.mode == "unknown")
    return (
        f"Whether {unknown} answered live or through the offline provider is not known: no log "
        "was read, or the one read lacks their calls (run `playlisteval report` with the --home "
        "of the workspace that evaluated). An offline answer is a harness, not evidence of model "
        "quality."
    )


def figure_note(source: Source, sources: Mapping[str, JudgeSource]) -> str | None:
    """The note under every figure and table: the offline provider is a harness (said of the
    offline judges only where a real local model sits beside them), or who answered is not
    known; None for a live report."""
    if source == "unknown":
        return UNKNOWN_NOTE
    if source == "mixed" and any(s.real_local for s in sources.values()):
        return REAL_BESIDE_OFFLINE_NOTE
    return OFFLINE_NOTE if source in ("offline", "mixed") else None
