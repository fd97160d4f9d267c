"""The judgments viewer: an evaluation folder's records, per pair, judge and condition with both
answer orders side by side, filtered to the wrong, the inconsistent and the unparseable ones; and
for one of them what each order's judge was shown, the prompt it was sent, its raw output and
its verdict.

What the judge was shown comes from the record itself (``shown``: the frames' times, their
height, transcript characters and windows, seconds of sound). The prompt is not in the log: a
recorded call keeps its request key (a hash of the messages, the attachments' content keys, the
output schema and the settings) and the response, not the request. So the viewer rebuilds the
request with the evaluation's own code (:func:`agents.evaluation.build_view`, the judge's
context, :class:`agents.workers.ModelRunner`) from the benchmark record and the condition, and
asks a strict recorder over the evaluation's stream to serve it: only a request whose key the
log holds is served. The page says which it is — the prompt the judge was sent (its key is the
record's ``call_key``), or a rebuilt prompt that does not match (code, settings or workspace
changed since), with why.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

import anyio
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings

from agents.evaluation import (
    EVALUATION_FILE,
    GATE,
    JUDGE_ROLE,
    JUDGMENTS_FILE,
    build_view,
    eval_stream,
    read_judgments,
    receives_of,
    thinking_settings,
)
from agents.evidence import SeedEvidence
from agents.recorded import (
    Append,
    CallContext,
    CallRecorder,
    ModelRefused,
    NoCallModel,
    Recorded,
    RecordedCalls,
)
from agents.workers import MalformedOutput, ModelRunner, SeedCall
from playlisteval.app import App, traffic_for
from playlisteval.ui.benchmark import Benchmark, BenchmarkPair
from policies.budget import Budget
from policies.judging import ORDERS, Condition, JudgmentRecord, Order
from store.answers import answered_by
from store.errors import ConfigError, MediaError, PlaylistEvalError, ReplayDivergence
from store.events import CallFailed, CallRecorded, Event
from store.eventstore import EventStore
from tools.contracts.roles import PairJudgeContext, PairVerdict, SegmentEvidence
from tools.evidence.retrieval import RetrieverSet
from tools.index import media
from tools.providers.base import user_prompt_items
from tools.providers.judges import stood_in_for

Filter = Literal["all", "wrong", "inconsistent", "unparseable"]
FILTERS: tuple[Filter, ...] = get_args(Filter)
FILTER_TITLES: dict[Filter, str] = {
    "all": "all",
    "wrong": "wrong (the worse answer picked in an order)",
    "inconsistent": "inconsistent across orders",
    "unparseable": "unparseable output",
}
THUMBNAIL_HEIGHT = 90
# Rebuilt requests kept in memory: a page shows one group (two orders, one view).
_REBUILT_KEPT = 64


# -- the evaluation folder ------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationFolder:
    """One ``playlisteval eval --out`` folder, read: its description and its records."""

    name: str  # its name in the viewer's URLs
    path: Path
    evaluation_id: str
    benchmark_sha256: str
    started: str
    records: tuple[JudgmentRecord, ...]

    @property
    def judges(self) -> list[str]:
        """The judges its records hold, in first-seen order."""
        return list(dict.fromkeys(r.judge for r in self.records))

    @property
    def conditions(self) -> list[str]:
        """The condition labels its records hold, in first-seen order."""
        return list(dict.fromkeys(r.condition_id for r in self.records))

    @cached_property
    def groups(self) -> Mapping[tuple[str, str, str], JudgmentGroup]:
        """Its records as groups by ``(pair id, judge, condition id)``, in that order: made once,
        so a judgment's page finds its group without going over every record."""
        return {group.key: group for group in group_records(self.records)}

    @cached_property
    def shown_frames(self) -> frozenset[tuple[str, float]]:
        """Every (video id, second) a judge of it was shown: the frames the viewer may serve."""
        return frozenset(
            (video, at)
            for record in self.records
            if record.shown is not None
            for video, at in record.shown.frame_times
        )


_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def load_evaluations(paths: Sequence[Path], benchmark: Benchmark) -> dict[str, EvaluationFolder]:
    """The evaluation folders ``paths`` by their names in the viewer; :class:`ConfigError` for
    a folder that is no evaluation or evaluates another benchmark than ``benchmark`` (the
    viewer shows each judgment beside the benchmark's pair and rebuilds its prompt from it), and
    for a line of its ``judgments.jsonl`` that is not a judgment record, named with its file and
    line (:func:`agents.evaluation.read_judgments`, as ``report`` names it): a record left out
    unsaid would change every count the viewer shows. Only a last line a crash cut short is
    left out."""
    out: dict[str, EvaluationFolder] = {}
    for given in paths:
        path = Path(given).expanduser().resolve()
        info_file = path / EVALUATION_FILE
        if not info_file.is_file():
            raise ConfigError(
                f"{str(path)!r} holds no {EVALUATION_FILE}: give a folder `playlisteval eval "
                "--out` wrote"
            )
        try:
            info = json.loads(info_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{str(info_file)!r} is not valid JSON: {exc}") from exc
        if not isinstance(info, dict) or not info.get("evaluation_id"):
            raise ConfigError(
                f"{str(info_file)!r} names no evaluation_id; run the evaluation again"
            )
        sha = str(info.get("benchmark_sha256") or "")
        if sha != benchmark.content_sha256:
            raise ConfigError(
                f"{str(path)!r} evaluates another benchmark (content {sha[:12]!r}…) than "
                f"{str(benchmark.path)!r} ({benchmark.content_sha256[:12]}…); start the UI on "
                "the benchmark it evaluated"
            )
        name = _SLUG.sub("-", path.name).strip("-") or "evaluation"
        unique, n = name, 2
        while unique in out:
            unique, n = f"{name}-{n}", n + 1
        out[unique] = EvaluationFolder(
            name=unique,
            path=path,
            evaluation_id=str(info["evaluation_id"]),
            benchmark_sha256=sha,
            started=str(info.get("started") or ""),
            records=tuple(read_judgments(path / JUDGMENTS_FILE)),
        )
    return out


@dataclass(frozen=True)
class AnsweredKeys:
    """Who answered an evaluation's calls, by request key: ``offline``, the offline provider
    (a harness's verdicts, not evidence of model quality); ``real_local``, a real model run on
    this machine (:data:`tools.providers.local_llm.REAL_LOCAL_LABEL`, never the harness)."""

    offline: Set[str]
    real_local: Set[str]


class EvaluationCalls:
    """One evaluation's log as the viewer reads it: where each recorded answer lies (its seq, by
    request key) and who answered each call.

    The stream is read once, then only what was appended since (:meth:`catch_up`); a judgment's
    page fetches the few calls it replays by their seqs (:meth:`hit`), so what a page reads does
    not grow with the evaluation or its log. ``rows_read`` counts the stored events this index
    has read, for the bench and the tests that hold the page to that."""

    def __init__(self, store: EventStore, evaluation_id: str) -> None:
        self._store = store
        self.stream = eval_stream(evaluation_id)
        self._version = 0
        self._seqs: dict[str, list[int]] = {}
        self._offline: set[str] = set()
        self._real_local: set[str] = set()
        self._lock = threading.Lock()
        self.rows_read = 0

    def catch_up(self) -> None:
        """Index what the stream holds beyond what was read before."""
        with self._lock:
            rows = self._store.read_stream(self.stream, self._version)
            self.rows_read += len(rows)
            for stored in rows:
                self._version = stored.version
                if stored.type not in ("CallRecorded", "CallFailed"):
                    continue
                # What replay serves (a refusal included) is RecordedCalls' rule, applied here.
                for key, found in RecordedCalls.from_stored([stored]).by_key.items():
                    self._seqs.setdefault(key, []).extend(seq for _event, seq in found)
                if stored.type != "CallRecorded":
                    continue
                key = str(stored.data.get("key", ""))
                if answered_by(stored.data, original=True) == "real-local":
                    self._real_local.add(key)
                elif stored.data.get("offline"):
                    self._offline.add(key)

    @property
    def answered(self) -> AnsweredKeys:
        """Which calls the offline provider and which a real local model answered, as the log
        says on each recorded call (its ``offline`` flag; the response's family): live views,
        not copies, so reading them costs nothing per page."""
        return AnsweredKeys(offline=self._offline, real_local=self._real_local)

    def hit(self, key: str, occurrence: int) -> tuple[Recorded, int] | None:
        """The ``occurrence``-th recorded answer to request ``key`` with its seq, fetched from
        the store by that seq (one row); None when the log holds no such answer."""
        with self._lock:
            seqs = self._seqs.get(key, [])
            if occurrence >= len(seqs):
                return None
            seq = seqs[occurrence]
        rows = self._store.read_all(after_seq=seq - 1, limit=1)
        self.rows_read += len(rows)
        event = rows[0].event()
        assert isinstance(event, CallRecorded | CallFailed)  # indexed as one (catch_up)
        return event, seq


class _IndexedCalls(RecordedCalls):
    """The recorded answers a strict replay serves, looked up in an :class:`EvaluationCalls`
    instead of an index of the whole log built for each request."""

    def __init__(self, calls: EvaluationCalls) -> None:
        super().__init__()
        self._calls = calls

    def hit(self, key: str, occurrence: int) -> tuple[Recorded, int] | None:
        """That answer and its seq, from the evaluation's index."""
        return self._calls.hit(key, occurrence)


# -- groups and filters (pure) --------------------------------------------------------------------


@dataclass(frozen=True)
class JudgmentGroup:
    """One judge's two verdicts (one per answer order) on one pair under one condition."""

    pair_id: str
    judge: str
    condition_id: str
    orders: Mapping[Order, JudgmentRecord]

    @property
    def key(self) -> tuple[str, str, str]:
        """``(pair id, judge, condition id)``."""
        return (self.pair_id, self.judge, self.condition_id)

    @property
    def wrong(self) -> bool:
        """The judge picked the worse (rejected) answer in at least one order."""
        return any(r.judgment.answer == "rejected" for r in self.orders.values())

    @property
    def unparseable(self) -> bool:
        """The judge's output could not be read as a verdict in at least one order."""
        return any(r.verdict is None for r in self.orders.values())

    @property
    def inconsistent(self) -> bool:
        """Both orders were judged and name different answers (chosen, rejected, a tie or
        nothing readable): the verdict follows the position, not the content."""
        if len(self.orders) < 2:
            return False
        answers = {r.judgment.answer for r in self.orders.values()}
        return len(answers) > 1

    def shows(self, which: Filter) -> bool:
        """Whether the group passes filter ``which``."""
        return which == "all" or bool(getattr(self, which))


def group_records(records: Iterable[JudgmentRecord]) -> list[JudgmentGroup]:
    """Records as groups, in the order of their (pair, judge, condition)."""
    grouped: dict[tuple[str, str, str], dict[Order, JudgmentRecord]] = {}
    for record in records:
        grouped.setdefault((record.pair_id, record.judge, record.condition_id), {})[
            record.order
        ] = record
    return [
        JudgmentGroup(pair_id=p, judge=j, condition_id=c, orders=orders)
        for (p, j, c), orders in sorted(grouped.items())
    ]


def check_filter(text: str) -> Filter:
    """The filter ``text`` names; :class:`ConfigError` saying which there are otherwise."""
    for which in FILTERS:
        if text == which:
            return which
    raise ConfigError(f"no filter {text!r}; use one of {list(FILTERS)!r}")


def answer_name(record: JudgmentRecord) -> str:
    """What a verdict says in the benchmark's terms: the chosen (better) answer, the rejected
    one, a tie, or unparseable."""
    answer = record.judgment.answer
    return "unparseable" if answer is None else answer


# -- what the judge was sent ---------------------------------------------------------------------


@dataclass(frozen=True)
class RebuiltPrompt:
    """A judgment's request, rebuilt: the prompt text, the attachments it carried, and whether
    the evaluation's log holds a call with that exact request (``matches``), with why not."""

    text: str
    attachments: tuple[str, ...]
    matches: bool
    served_key: str
    note: str


@dataclass(frozen=True)
class OrderView:
    """What one order's judge was shown and sent: the transcript windows, the request."""

    record: JudgmentRecord
    transcript: tuple[SegmentEvidence, ...]
    prompt: RebuiltPrompt | None
    error: str  # why the view or the prompt could not be rebuilt ("" when it was)


class _KeptRequest(CallRecorder):
    """A strict recorder that keeps the messages it was asked to serve."""

    sent: list[ModelMessage] | None = None

    async def call(
        self,
        wrapped: Model,
        context: CallContext,
        append: Append,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        params: ModelRequestParameters,
    ) -> ModelResponse:
        """Keep ``messages``, then serve from the log (or refuse) as a strict replay does."""
        self.sent = messages
        return await super().call(wrapped, context, append, messages, settings, params)


def _prompt_of(messages: list[ModelMessage] | None) -> tuple[str, tuple[str, ...]]:
    """The user prompt's text and the attachments' identifiers of a request."""
    texts: list[str] = []
    attached: list[str] = []
    for item in user_prompt_items(messages or []):
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, BinaryContent):
            attached.append(item.identifier or item.media_type)
    return "\n\n".join(texts), tuple(attached)


def _record_of(pair: BenchmarkPair) -> dict[str, Any]:
    """A benchmark pair as the evaluation reads its record."""
    return {
        "id": pair.id,
        "prompt": pair.prompt,
        "chosen": pair.chosen,
        "rejected": pair.rejected,
        "evidence": [
            {"video_id": c.video_id, "start_s": c.start_s, "end_s": c.end_s} for c in pair.evidence
        ],
    }


class PromptRebuilder:
    """Rebuilds judgments' requests over one workspace and checks them against the log.

    Views (what a pair shows under a condition, the same in both orders) and rebuilt prompts are
    kept for the last few groups: a page asks for both orders of one group. Each evaluation's
    log is indexed once (:class:`EvaluationCalls`), so checking a request reads the calls it
    names, not the log."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._calls: dict[str, EvaluationCalls] = {}
        self._retriever_set: RetrieverSet | None = None  # made on first use
        self._views: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._prompts: OrderedDict[tuple[str, tuple[str, str, str, str]], RebuiltPrompt] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def calls(self, evaluation: EvaluationFolder) -> EvaluationCalls:
        """The index of ``evaluation``'s log, made on first use and caught up with what was
        appended since each time it is asked for."""
        with self._lock:
            found = self._calls.get(evaluation.evaluation_id)
            if found is None:
                found = self._calls[evaluation.evaluation_id] = EvaluationCalls(
                    self._app.events, evaluation.evaluation_id
                )
        found.catch_up()
        return found

    def _retrievers(self) -> RetrieverSet:
        """The retrievers conditions name, from the one registry `playlisteval eval` reads
        (:class:`tools.evidence.retrieval.RetrieverSet`); each is built only when a view asks for it
        (the embedding ones load the embedder)."""
        if self._retriever_set is None:
            self._retriever_set = RetrieverSet(self._app.catalog, self._app.search)
        return self._retriever_set

    def _view(self, pair: BenchmarkPair, condition: Condition) -> Any:
        key = (pair.id, condition.condition_id)
        if key not in self._views:
            # build_view asks the set for the condition's retriever only (and names the known
            # ones when it is none of them).
            self._views[key] = build_view(
                self._app.catalog,
                self._app.clips(),
                self._retrievers(),
                _record_of(pair),
                condition,
            )
            while len(self._views) > _REBUILT_KEPT:
                self._views.popitem(last=False)
        return self._views[key]

    def order_view(
        self, evaluation: EvaluationFolder, pair: BenchmarkPair, record: JudgmentRecord
    ) -> OrderView:
        """What ``record``'s judge was shown and sent, rebuilt; the reason in ``error`` when
        the workspace cannot rebuild it (a video gone, an index not built)."""
        calls = self.calls(evaluation)
        with self._lock:
            try:
                view = self._view(pair, record.condition)
            except (PlaylistEvalError, OSError) as exc:
                return OrderView(record, (), None, f"the view could not be rebuilt: {exc}")
            transcript = tuple(s for s in view.segments if s.chunks)
            key = (evaluation.evaluation_id, record.key)
            prompt = self._prompts.get(key)
            if prompt is None:
                try:
                    prompt = self._prompts[key] = self._request(calls, pair, record, view)
                except (PlaylistEvalError, OSError) as exc:
                    return OrderView(record, transcript, None, f"the prompt was not rebuilt: {exc}")
                while len(self._prompts) > _REBUILT_KEPT:
                    self._prompts.popitem(last=False)
            return OrderView(record, transcript, prompt, "")

    def _request(
        self, calls: EvaluationCalls, pair: BenchmarkPair, record: JudgmentRecord, view: Any
    ) -> RebuiltPrompt:
        """Rebuild ``record``'s request and ask a strict recorder over the evaluation's log to
        serve it (it serves only a request whose key the log holds, fetched by its seq)."""
        settings = self._app.settings
        prices = self._app.prices()  # the workspace's one table (real local models at zero)
        recorder = _KeptRequest(
            budget=Budget(None),
            prices=prices,
            recorded=_IndexedCalls(calls),
            mode="strict",
            offline=True,
            traffic=traffic_for(settings, live=False),
        )

        def no_call(model_id: str) -> Model:
            return NoCallModel(TestModel(custom_output_text=f"no call to {model_id}"))

        runner = ModelRunner(recorder=recorder, model_for=no_call)
        first, second = (
            (pair.chosen, pair.rejected)
            if record.order == "chosen_first"
            else (pair.rejected, pair.chosen)
        )
        context = PairJudgeContext(
            question=pair.prompt,
            answer_a=first,
            answer_b=second,
            segments=view.segments,
            receives=receives_of(
                record.condition, bool(view.clips), any(s.chunks for s in view.segments)
            ),
        )
        served: list[CallRecorded] = []

        async def append(event: Event) -> None:
            if isinstance(event, CallRecorded):
                served.append(event)

        # A stand-in's judgments are recorded as offline-stand-in(ID); its calls were made, and
        # are keyed, under the model id itself.
        model = stood_in_for(record.judge) or record.judge
        owner = f"{record.pair_id}/{model}/{record.condition_id}/{record.order}"
        call = SeedCall(
            seed_id=owner,
            evidence=SeedEvidence(self._app.catalog, self._app.clips(), record.pair_id, "", ""),
            append=append,
        )

        async def ask() -> str:
            try:
                await runner.run(
                    call,
                    JUDGE_ROLE,
                    model,
                    context,
                    PairVerdict,
                    phase=None,
                    gate=GATE,
                    attachments=view.clips,
                    extra_settings=thinking_settings(record.condition.thinking_budget),
                )
            except (MalformedOutput, ModelRefused):
                pass  # served from the log all the same: an unreadable or refused answer
            except ReplayDivergence:
                return "diverged"
            return "served"

        outcome = anyio.run(ask)
        text, attached = _prompt_of(recorder.sent)
        served_key = served[0].key if served else ""
        if outcome == "diverged":
            note = (
                "rebuilt with today's code, settings and workspace, but the evaluation's log "
                "holds no call with this request: the judge was sent something else (the code, "
                "the settings or the index changed since)"
            )
        elif not record.call_key:
            note = "the log holds a call with this request; the record names no call key"
        elif served_key != record.call_key:
            note = (
                f"the log holds a call with this request (key {served_key[:12]}…), but not the "
                f"one this record names ({record.call_key[:12]}…)"
            )
        else:
            note = (
                "the request the judge was sent: rebuilt from the benchmark record and the "
                f"condition, it hashes to this record's call key ({record.call_key[:12]}…)"
            )
        return RebuiltPrompt(
            text=text,
            attachments=attached,
            matches=outcome == "served" and served_key == record.call_key,
            served_key=served_key,
            note=note,
        )


def group_views(
    rebuilder: PromptRebuilder,
    evaluation: EvaluationFolder,
    pair: BenchmarkPair,
    group: JudgmentGroup,
) -> list[OrderView]:
    """Both orders of ``group``, chosen-first first."""
    return [
        rebuilder.order_view(evaluation, pair, group.orders[order])
        for order in ORDERS
        if order in group.orders
    ]


# -- frame thumbnails ------------------------------------------------------------------------------


class Thumbnails:
    """Small JPEGs of the frames records say were shown, decoded on demand and kept."""

    def __init__(self, kept: int = 512) -> None:
        self._kept = kept
        self._cache: OrderedDict[tuple[str, float], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def jpeg(self, path: Path, video_id: str, t: float) -> bytes:
        """The frame of ``path`` shown at ``t`` seconds, :data:`THUMBNAIL_HEIGHT` rows high;
        :class:`MediaError` when it cannot be decoded."""
        key = (video_id, t)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        from PIL import Image

        frames = media.sample_frames(
            path, fps=1.0, max_height=THUMBNAIL_HEIGHT, start_s=t, end_s=t + 0.5
        )
        if not frames:
            raise MediaError(f"no frame at {t:g} s in video {video_id!r}")
        out = io.BytesIO()
        Image.fromarray(frames[0].image).save(out, format="JPEG", quality=80)
        data = out.getvalue()
        with self._lock:
            self._cache[key] = data
            while len(self._cache) > self._kept:
                self._cache.popitem(last=False)
        return data
