"""The curation log's vocabulary: typed, frozen events in one discriminated union.

Every attempt, model call, gate verdict, rejection reason, reservation and cost is one of these,
appended to the event store. A stored event is ``(seq, stream, version, type, schema, data)``;
``data`` is the event's JSON. Money is integer micro-dollars (1 USD = 1_000_000), never floats.

Streams: ``run-<run_id>`` holds a run's start, policy and end; ``seed-<run_id>-<seed_id>`` holds
one seed's whole conversation in that run; ``pairs-<run_id>`` holds the run's pair selection
(candidates, the difficulty judges' calls and verdicts, what was kept and sampled). An event
never changes shape without a new ``schema`` number and an upcaster in :data:`UPCASTERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

MICROS_PER_USD = 1_000_000


def usd_to_micros(usd: float) -> int:
    """Dollars → integer micro-dollars (rounded half up)."""
    return round(usd * MICROS_PER_USD)


def micros_to_usd(micros: int) -> float:
    """Integer micro-dollars → dollars, for display only."""
    return micros / MICROS_PER_USD


@dataclass(frozen=True, slots=True)
class CallId:
    """A model call's id: ``<owner>:<n>``, the ``n``-th call of its owner (a seed, a pair, one
    judgment of an evaluation). Owners may contain ``:``; the number is after the last one."""

    owner: str
    n: int

    def __str__(self) -> str:
        return f"{self.owner}:{self.n}"

    @classmethod
    def parse(cls, text: str) -> CallId:
        """``"seed-1:7"`` → ``CallId("seed-1", 7)``; ValueError for text of another form."""
        owner, sep, number = text.rpartition(":")
        if not sep or not number.isdigit():
            raise ValueError(f"call id {text!r} is not of the form OWNER:N")
        return cls(owner, int(number))

    @staticmethod
    def owner_of(text: str) -> str:
        """The owner part of a call id (a fold's hot path: no object made)."""
        return text.rpartition(":")[0]


class Kind(StrEnum):
    """What an event is, as the readers of the log sort it. An event class declares its kinds
    (:attr:`Event.kinds`) and every table of types a reader needs is derived from the classes
    (:func:`types_of`): adding an event type is its class, plus the fold that uses it."""

    RUN = "run"  # a run's life: its start, upgrades, resumes and end
    DECISION = "decision"  # what the loop decides from the answers it is given (replay redoes it)
    TERMINAL = "terminal"  # a decision that ends its seed
    CALL = "call"  # about one model call
    MONEY = "money"  # moves the one ledger: a reservation, a charge, a release
    PAIR = "pair"  # the pair selection and its difficulty gate
    ANNOTATION = "annotation"  # human validation of an exported benchmark
    CONTROL = "control"  # caps, stops, provider resources, the store's own records


class Event(BaseModel):
    """Base of every event: frozen, no unknown fields. A concrete event (one with a ``type``
    literal) is known to the store the moment its class is defined: decoding, verification,
    replay and the audit find it in the registry (:func:`event_class`), under its kinds."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = 1
    #: What the event is (:class:`Kind`); the readers' tables of types come from these.
    kinds: ClassVar[frozenset[Kind]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields.get("type")
        if field is not None and isinstance(field.default, str):
            _register(field.default, cls)

    def timeline_step(self) -> dict[str, Any] | None:
        """The step this event makes in its seed's audit timeline (None: none). A decision
        says its type and fields unless its class words its step itself."""
        if Kind.DECISION not in self.kinds:
            return None
        fields = self.model_dump(mode="json", exclude={"type", "schema_version"})
        return {"step": event_type(self), **fields}


#: Every concrete event class by its ``type`` (filled as the classes are defined).
_CLASSES: dict[str, type[Event]] = {}
_KIND_CACHE: dict[tuple[Kind, ...], frozenset[str]] = {}


def _schema_of(cls: type[Event]) -> int:
    return int(cls.model_fields["schema_version"].default)


def _register(type_: str, cls: type[Event]) -> None:
    """Know ``cls`` as the class of ``type_``. A class of an older schema of a known type (a
    writer of old rows, as a test of the upcasters declares) is not the one rows decode to;
    two classes of one type and schema are an error."""
    known = _CLASSES.get(type_)
    if known is not None and known.__qualname__ != cls.__qualname__:
        if _schema_of(cls) < _schema_of(known):
            return
        if _schema_of(cls) == _schema_of(known):
            raise TypeError(f"two event classes claim the type {type_!r}: {known} and {cls}")
    _CLASSES[type_] = cls
    _KIND_CACHE.clear()


def forget_event_type(type_: str) -> None:
    """Take ``type_`` out of the registry (for a test that declared an event class of its own)."""
    _CLASSES.pop(type_, None)
    _KIND_CACHE.clear()


def type_name(cls: type[Event]) -> str:
    """The ``type`` a concrete event class is stored under."""
    default = cls.model_fields["type"].default
    if not isinstance(default, str):
        raise TypeError(f"{cls.__name__} is no concrete event (it has no type literal)")
    return default


def event_class(type_: str) -> type[Event] | None:
    """The class of stored events of ``type_`` (None: no event this code knows)."""
    return _CLASSES.get(type_)


def types_of(*kinds: Kind) -> frozenset[str]:
    """The types of every known event class that is each of ``kinds``."""
    key = tuple(sorted(kinds))
    found = _KIND_CACHE.get(key)
    if found is None:
        wanted = set(kinds)
        found = frozenset(t for t, c in _CLASSES.items() if wanted <= c.kinds)
        _KIND_CACHE[key] = found
    return found


# -- runs ---------------------------------------------------------------------------------------


class RunEvent(Event):
    """What every event of a run's life says (its start, upgrades, resumes, seeds started and
    end): which run it is."""

    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.RUN})
    run_id: str


class RunStarted(RunEvent):
    """A curation run begins: its policy and the seeds it will work on.

    ``spec`` is the run's definition (``agents.run_spec.RunSpec``'s JSON: its gates in order,
    each role's model, prompt template and output schema by content hash, its frame plans, loop
    policy and prices): replay, resume, the fleet and the daemon build the run from it, never
    from the code and settings of the day. Schema 1 recorded none (None: the run predates it)."""

    schema_version: int = 2
    type: Literal["RunStarted"] = "RunStarted"
    seeds: tuple[str, ...]
    budget_micros: int | None
    per_seed_micros: int | None = None
    max_attempts: int
    concurrency: int
    offline: bool
    models: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    parent_run: str | None = None
    spec: dict[str, Any] | None = None


class RunUpgraded(RunEvent):
    """A run's definition was changed on purpose (``curate --run RUN --upgrade``): from this
    event on, its seeds are decided under ``spec`` (a ``RunSpec``'s JSON); ``differences``
    names each way it differs from the definition in force before."""

    type: Literal["RunUpgraded"] = "RunUpgraded"
    spec: dict[str, Any]
    differences: tuple[str, ...]
    command: str


class RunResumed(RunEvent):
    """A run was picked up again after a stop or a crash. ``prices`` are the price rows in
    force from here on (as :meth:`policies.prices.PriceTable.snapshot` writes them; schema 1
    did not record them: the run's start's then), so a replay prices each call as it was
    priced when it was made."""

    schema_version: int = 2
    type: Literal["RunResumed"] = "RunResumed"
    budget_micros: int | None
    orphan_reservations_micros: int = 0
    prices: dict[str, Any] | None = None


class RunFinished(RunEvent):
    """A run ended: ``completed`` (every seed decided) or ``budget`` (the cap stopped it).
    ``anchor`` is the :class:`store.eventstore.Anchor` of the run's streams as they ended (its
    JSON; schema 1 had none), which ``runs`` shows and exports publish."""

    schema_version: int = 2
    type: Literal["RunFinished"] = "RunFinished"
    outcome: Literal["completed", "budget", "interrupted"]
    spent_micros: int
    accepted: int
    discarded: int
    stopped: int
    anchor: dict[str, Any] | None = None


# -- seeds ---------------------------------------------------------------------------------------


class SeedStarted(RunEvent):
    """A seed enters the loop with its two segments."""

    type: Literal["SeedStarted"] = "SeedStarted"
    seed_id: str
    domain: str
    segment_a: str
    segment_b: str


class AttemptStarted(Event):
    """A generator attempt begins; ``feedback`` is what it is told of earlier rejections."""

    type: Literal["AttemptStarted"] = "AttemptStarted"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION})
    phase: Literal[1, 2]
    attempt: int
    feedback: tuple[str, ...] = ()


class CallEvent(Event):
    """What every event about one model call says: which call, its request key, the role, the
    priced model, and the phase and gate it serves ("generator" for a generator's call)."""

    call_id: str
    key: str
    role: str
    model: str
    phase: int | None = None
    gate: str | None = None


class CallReserved(CallEvent):
    """Budget set aside for one model call before it is made (its worst case)."""

    type: Literal["CallReserved"] = "CallReserved"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL, Kind.MONEY})
    reserved_micros: int


class CallRecorded(CallEvent):
    """A model call's response, usage and actual cost; the reservation is settled by it.

    ``response`` is pydantic-ai's JSON of the ``ModelResponse``; replay serves it by ``key``.
    ``replayed`` marks a response served from an earlier record (it cost nothing this time).
    """

    type: Literal["CallRecorded"] = "CallRecorded"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL, Kind.MONEY})
    response: Any
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_micros: int
    offline: bool
    replayed: bool = False
    # What the cost was computed from, by kind (text, image, video, audio, cached, output,
    # cache_write, cache_storage_token_s): enough to price the call again under other rules.
    usage: dict[str, int] = Field(default_factory=dict)
    batch: bool = False  # answered through a provider's batch API (batch prices)
    attempts: int = 1  # HTTP attempts it took (retries of 429, 5xx, timeouts included)
    provider_cost: bool = False  # the cost is the provider's own figure, not our price table's
    # The content hash of the prompt template the request was rendered from (empty: a log
    # written before it was recorded, or a call with no template, such as a judge's).
    template: str = ""
    # Who answered: "live", "offline" (the harness), "real-local" or "log" (served again);
    # empty in logs written before it was recorded (store.answers.answered_by reads those).
    answered_by: str = ""


class CallFailed(CallEvent):
    """A model call failed for good; its reservation is released (or kept, when it may have
    been charged)."""

    type: Literal["CallFailed"] = "CallFailed"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL, Kind.MONEY})
    error: str
    charged_micros: int = 0
    # "error": the provider failed (the seed is parked); "refusal": the model declined to
    # answer (a recorded outcome, replayed like a response); "interrupted": the worker shut
    # down while the call was in flight (charged at its reservation, made again on resume).
    outcome: Literal["error", "refusal", "interrupted"] = "error"
    attempts: int = 1


class CallRetried(CallEvent):
    """One attempt of a call failed in a way worth retrying (429, 5xx, a timeout, a dropped
    connection, a malformed body); the call waits ``wait_s`` and tries again: under the same
    reservation when the attempt cost nothing, else (``charged_micros``) under a new one."""

    type: Literal["CallRetried"] = "CallRetried"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL, Kind.MONEY})
    attempt: int
    kind: str
    status: int | None = None
    wait_s: float
    error: str
    # What the failed attempt may have been billed (its reservation, when its outcome is
    # unknown: a timeout, a dropped connection, a 5xx); 0 when the answer proves it free (a
    # 429, another 4xx). Charged, the reservation is closed and the retry reserves again.
    charged_micros: int = 0


class CallBatched(CallEvent):
    """A call was submitted in a provider batch job; its answer is collected from ``batch``
    (pydantic-ai's plain-data handle), also after a restart."""

    type: Literal["CallBatched"] = "CallBatched"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL})
    custom_id: str
    batch: dict[str, Any]


class ProviderResourceCreated(Event):
    """Something made on a provider's side that later calls reuse instead of paying again: an
    uploaded file or a context cache (stream ``provider-resources``)."""

    type: Literal["ProviderResourceCreated"] = "ProviderResourceCreated"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CONTROL})
    provider: str
    kind: Literal["upload", "cache"]
    key: str
    name: str
    expires_at: str | None = None
    tokens: int = 0


class CallRefused(Event):
    """The budget refused a call: the reservation would have passed ``cap`` (the run's, the
    seed's, or a shared account's of the daemon and its workers)."""

    schema_version: int = 2
    type: Literal["CallRefused"] = "CallRefused"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CALL})
    key: str
    role: str
    model: str
    needed_micros: int
    reason: str
    cap: Literal["run", "seed", "account"]


class QAProposed(Event):
    """Phase I output: a question and gold answer with citations and verification metadata."""

    type: Literal["QAProposed"] = "QAProposed"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION})
    attempt: int
    qa: dict[str, Any]


class DistractorsProposed(Event):
    """Phase II output: four graded wrong answers with their causal records."""

    type: Literal["DistractorsProposed"] = "DistractorsProposed"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION})
    attempt: int
    distractors: dict[str, Any]


class GateEvent(Event):
    """What every event about one gate's verdict says: the phase, the gate and the attempt
    whose output it judges."""

    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION})
    phase: Literal[1, 2]
    gate: str
    attempt: int


class GateRequested(GateEvent):
    """The coordinator asks a verifier for a gate's verdict on the current output."""

    type: Literal["GateRequested"] = "GateRequested"


class GatePassed(GateEvent):
    """A gate let the current output through."""

    type: Literal["GatePassed"] = "GatePassed"
    detail: str = ""


class GateRejected(GateEvent):
    """A gate rejected the current output; the reason and output go back to the generator."""

    type: Literal["GateRejected"] = "GateRejected"
    reason: str
    rejected_output: str


class ItemAccepted(Event):
    """The seed produced a benchmark item: the question, gold (5) and answers rated 4..1."""

    type: Literal["ItemAccepted"] = "ItemAccepted"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION, Kind.TERMINAL})
    seed_id: str
    qa: dict[str, Any]
    distractors: dict[str, Any]


class SeedDiscarded(Event):
    """The seed used up its attempts; the reasons are kept."""

    type: Literal["SeedDiscarded"] = "SeedDiscarded"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.DECISION, Kind.TERMINAL})
    seed_id: str
    reasons: tuple[str, ...]


class SeedStopped(Event):
    """The seed could not go on: the budget refused its next call, a provider failed for good,
    a counterfactual replay needed a call the log does not hold, or its evidence could not be
    read. It can be finished later (``replay --resume``)."""

    type: Literal["SeedStopped"] = "SeedStopped"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CONTROL})
    seed_id: str
    reason: Literal["budget", "provider", "unrecorded", "error", "interrupted"]
    detail: str = ""


class CapSet(Event):
    """A command set the cap its calls in this stream are made under from here on (a pair
    selection's, an evaluation's): ``cap_micros`` is the stream's total, earlier calls included
    (None: no cap); ``command`` says who set it."""

    type: Literal["CapSet"] = "CapSet"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CONTROL})
    cap_micros: int | None
    command: str


class LogRekeyed(Event):
    """``playlisteval store rekey`` brought the log under its key: how it was chained before
    (``was``: "this key", "the old key", "plain SHA-256", or unverified), whether it was checked
    under that chain before being re-chained, how many events it held, the key's fingerprint
    and the command."""

    type: Literal["LogRekeyed"] = "LogRekeyed"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.CONTROL})
    was: str
    checked: bool
    events: int
    key_id: str
    command: str


# -- pairs --------------------------------------------------------------------------------------


class PairEvent(Event):
    """What every event about one pair of a run's pair selection says: which pair it is."""

    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.PAIR})
    pair_id: str


class PairCandidate(PairEvent):
    """Two answers of an accepted item make a candidate pair, the higher rating preferred."""

    type: Literal["PairCandidate"] = "PairCandidate"
    seed_id: str
    domain: str
    chosen_rating: int
    rejected_rating: int


class PairJudged(PairEvent):
    """One difficulty judge's answer on a pair shown in one order: ``choice`` is "A" (the answer
    shown first), "B", "tie", or "invalid" (no usable answer); ``correct`` when it is the
    preferred answer."""

    type: Literal["PairJudged"] = "PairJudged"
    judge: str
    order: Literal["chosen_first", "rejected_first"]
    choice: Literal["A", "B", "tie", "invalid"]
    correct: bool
    reason: str = ""
    # What of each segment's video the judge was shown: ``segment_id``, ``frames`` (None for
    # native video) and ``fps`` over the segment, as its request was planned (fitted to its
    # context window). Empty in logs written before it was recorded.
    video: list[dict[str, Any]] = Field(default_factory=list)


# The difficulty gate's rule before it was a setting (schema 1 of PairKept and PairDropped):
# a judge failed a pair unless right in both orders, a tie or unparseable answer counting wrong.
_FIRST_GATE_RULE = "keep_when=wrong_or_inconsistent, ties=wrong"


class PairKept(PairEvent):
    """The difficulty gate kept a pair: the judges in ``failed_by`` fail it under ``rule``
    (``pairs.keep_when`` and ``pairs.ties``, as ``policies.pairs.GateRule.label`` writes it)."""

    schema_version: int = 2
    type: Literal["PairKept"] = "PairKept"
    failed_by: tuple[str, ...]
    rule: str


class PairDropped(PairEvent):
    """The difficulty gate dropped a pair: no judge fails it under ``rule``."""

    schema_version: int = 2
    type: Literal["PairDropped"] = "PairDropped"
    reason: str
    rule: str


class PairsSampled(Event):
    """The benchmark's pairs: ``per_domain`` of the kept pairs per domain, split across rating
    gaps as ``sampling`` says (``proportional`` or ``stratified``), drawn with ``seed``."""

    schema_version: int = 2
    type: Literal["PairsSampled"] = "PairsSampled"
    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.PAIR})
    per_domain: int
    seed: int
    pair_ids: tuple[str, ...]
    sampling: str


AnyEvent = Annotated[
    RunStarted
    | RunUpgraded
    | RunResumed
    | RunFinished
    | SeedStarted
    | AttemptStarted
    | CallReserved
    | CallRecorded
    | CallFailed
    | CallRetried
    | CallBatched
    | CallRefused
    | ProviderResourceCreated
    | QAProposed
    | DistractorsProposed
    | GateRequested
    | GatePassed
    | GateRejected
    | ItemAccepted
    | SeedDiscarded
    | SeedStopped
    | PairCandidate
    | PairJudged
    | PairKept
    | PairDropped
    | PairsSampled
    | CapSet
    | LogRekeyed,
    Field(discriminator="type"),
]


def _refused_cap(reason: str) -> str:
    """Whose cap a schema-1 ``CallRefused`` reason names."""
    for which in ("seed", "account"):
        if reason.startswith(f"budget exhausted for {which} "):
            return which
    return "run"


# (type, stored schema) → function bringing its data to the current schema.
UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    # Schema 1 was written before the gate's rule and the sampling were settings: they were the
    # first rule and stratified sampling.
    ("PairKept", 1): lambda data: {**data, "rule": _FIRST_GATE_RULE},
    ("PairDropped", 1): lambda data: {**data, "rule": _FIRST_GATE_RULE},
    ("PairsSampled", 1): lambda data: {**data, "sampling": "stratified"},
    # Schema 1 said whose cap refused only in its reason, as policies.budget.BudgetExhausted
    # worded it then ("budget exhausted for seed 's1': ...", "... for account 'x': ...",
    # "... for the run: ...").
    ("CallRefused", 1): lambda data: {**data, "cap": _refused_cap(str(data["reason"]))},
    # Schema 1 recorded no definition at a run's start (agents.run_spec rebuilds one from
    # what it did record and the gates its log asked for).
    ("RunStarted", 1): lambda data: {**data, "spec": None},
    # Schema 1 recorded no prices on a resume nor an anchor at a run's end.
    ("RunResumed", 1): lambda data: {**data, "prices": None},
    ("RunFinished", 1): lambda data: {**data, "anchor": None},
}


def event_type(event: Event) -> str:
    """The discriminator of an event."""
    return str(getattr(event, "type"))  # noqa: B009 (every concrete event has it)


def encode_event(event: Event) -> tuple[str, int, dict[str, Any]]:
    """``(type, schema, data)`` as stored."""
    data = event.model_dump(mode="json", exclude={"type", "schema_version"})
    return event_type(event), event.schema_version, data


def upcast(type_: str, schema: int, data: Mapping[str, Any]) -> dict[str, Any]:
    """Stored data of ``(type_, schema)`` brought to the current schema (a copy)."""
    payload = dict(data)
    while (type_, schema) in UPCASTERS:
        payload = UPCASTERS[(type_, schema)](payload)
        schema += 1
    return payload


def current_schema(type_: str, schema: int) -> int:
    """The schema number stored data of ``(type_, schema)`` has after upcasting."""
    while (type_, schema) in UPCASTERS:
        schema += 1
    return schema


def decode_event(type_: str, schema: int, data: Mapping[str, Any]) -> Event:
    """Stored ``(type, schema, data)`` → its registered class, upcasting old schemas;
    :class:`UnknownEventType` (a ValueError) for a type no class claims."""
    cls = _CLASSES.get(type_)
    if cls is None:
        raise UnknownEventType(f"no event type {type_!r} is known")
    payload = upcast(type_, schema, data)
    current = current_schema(type_, schema)
    return cls.model_validate({**payload, "type": type_, "schema_version": current})


class UnknownEventType(ValueError):
    """A stored event's type that no event class claims."""


def run_stream(run_id: str) -> str:
    """Stream of a run's own events."""
    return f"run-{run_id}"


PROVIDER_RESOURCES_STREAM = "provider-resources"


def seed_stream(run_id: str, seed_id: str) -> str:
    """Stream of one seed's events in one run."""
    return f"seed-{run_id}-{seed_id}"


def pairs_stream(run_id: str) -> str:
    """Stream of a run's pair selection."""
    return f"pairs-{run_id}"


def run_streams(run_id: str, *, pairs: bool = True) -> tuple[str, ...]:
    """The streams a run's figures rest on, as an anchor names them (``*``: a prefix): its own,
    its seeds' and (with ``pairs``) its pair selection's."""
    own = (run_stream(run_id), seed_stream(run_id, "") + "*")
    return (*own, pairs_stream(run_id)) if pairs else own
