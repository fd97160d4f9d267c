"""The difficulty gate's rule and the sample's split across rating gaps.

A pair is kept as hard when a weak judge fails it. What failing is — wrong in both answer orders,
or also right in one and wrong in the other; how a tie or an unparseable answer counts — is the
gate's rule (``pairs.keep_when``, ``pairs.ties``), tested here on the pure functions and end to end
with judges of fixed behaviour (pydantic-ai ``FunctionModel``s, the model edge) on a real curated
workspace. The assertions hold whichever seeds the run curated: they compare with the run's own
candidate pairs, never with counts of a particular seed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.deps import CallDeps
from agents.pairs import select_pairs
from playlisteval import runs
from playlisteval.app import App
from playlisteval.settings import Settings, load_settings
from policies.pairs import (
    PAPER_GATE,
    GateRule,
    JudgeVerdict,
    KeepWhen,
    SelectedPair,
    Ties,
    failing_judges,
    gap_quotas,
    judge_fails,
    proportional_quotas,
    sample_pairs,
)
from store.events import (
    CallRecorded,
    PairCandidate,
    PairDropped,
    PairJudged,
    PairKept,
    PairsSampled,
    decode_event,
    pairs_stream,
)
from tests.workspaces import copy_workspace

RUN = "gate"
TIE_JUDGE = "qwen3-vl-30b-a3b"  # priced judge ids; fixed-behaviour models answer in their place
FIRST_JUDGE = "internvl3.5-8b"

# -- the rule, on the pure functions -------------------------------------------------------------

BOTH = ("wrong_or_inconsistent", "wrong_both_orders")


@pytest.mark.parametrize(
    ("chosen_first", "rejected_first", "ties", "fails"),
    [
        # (verdict with the preferred answer first, with it second) → fails under each keep_when
        ("A", "B", "ignore", (False, False)),  # right in both orders
        ("B", "A", "ignore", (True, True)),  # wrong in both
        ("A", "A", "ignore", (True, False)),  # always the first shown: inconsistent
        ("B", "B", "ignore", (True, False)),  # always the second shown: inconsistent
        # A tie (or no usable answer) ignored says nothing: the other order decides, or nothing.
        ("tie", "tie", "ignore", (False, False)),
        ("invalid", "tie", "ignore", (False, False)),
        ("tie", "B", "ignore", (False, False)),
        ("tie", "A", "ignore", (True, True)),
        # A tie as half right: a coin flip, which is not consistently right.
        ("tie", "tie", "half", (True, False)),
        ("tie", "B", "half", (True, False)),
        ("tie", "A", "half", (True, True)),
        # A tie as wrong: the strictest reading, under which a tying judge fails everything.
        ("tie", "tie", "wrong", (True, True)),
        ("invalid", "invalid", "wrong", (True, True)),
        ("tie", "B", "wrong", (True, False)),
    ],
)
def test_what_failing_a_pair_means_follows_keep_when_and_ties(
    chosen_first: str, rejected_first: str, ties: Ties, fails: tuple[bool, bool]
) -> None:
    for keep_when, expected in zip(BOTH, fails, strict=True):
        rule = GateRule(keep_when=keep_when, ties=ties)  # type: ignore[arg-type]
        assert judge_fails(chosen_first, rejected_first, rule) is expected, (keep_when, ties)


def test_the_default_rule_is_the_papers_and_ignores_ties() -> None:
    settings = Settings()
    assert settings.pairs.gate_rule() == PAPER_GATE
    assert GateRule(keep_when="wrong_or_inconsistent", ties="ignore") == PAPER_GATE
    assert settings.pairs.sampling == "proportional"


def test_a_tying_judge_fails_nothing_by_default_and_everything_when_ties_count_as_wrong() -> None:
    tie = JudgeVerdict("tying", "tie", "tie", failed=False)
    right = JudgeVerdict("sharp", "A", "B", failed=False)
    assert failing_judges([tie, right], PAPER_GATE) == ()
    assert failing_judges([tie, right], GateRule(ties="wrong")) == ("tying",)


# -- the rule, end to end on a curated workspace ---------------------------------------------------


def always(choice: str) -> Callable[[str], Model]:
    """Models that answer every pair with ``choice`` ("A", "B" or "tie"), whatever is shown."""

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = json.dumps({"choice": choice, "reason": f"always {choice}"})
        return ModelResponse(parts=[ToolCallPart(tool_name=info.output_tools[0].name, args=args)])

    return lambda model_id: FunctionModel(answer, model_name=f"always-{choice}:{model_id}")


@pytest.fixture(scope="module")
def curated(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace after a small offline curation run (at least one accepted item)."""
    home = copy_workspace(demo_home, tmp_path_factory.mktemp("gate") / "ws")
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=None, max_seeds=2, run_id=RUN)
    assert report.accepted, "the offline demo run accepted no item to make pairs from"
    return home


def _gate(
    app: App,
    judge: str,
    models: Callable[[str], Model],
    rule: GateRule = PAPER_GATE,
    **options: Any,
) -> list[SelectedPair]:
    deps = CallDeps(
        store=app.events,
        catalog=app.catalog,
        clips=app.clips(),
        model_for=models,
        prices=app.prices(),
    )
    return anyio.run(
        lambda: select_pairs(
            deps,
            run_id=RUN,
            judges=[judge],
            rule=rule,
            offline=True,
            **{"per_domain": 90, **options},
        )
    )


def _decisions(app: App) -> tuple[set[str], dict[str, PairKept | PairDropped], int]:
    """The run's candidate pairs, the last decision on each, and how many judge calls were made."""
    events = [s.event() for s in app.events.read_stream(pairs_stream(RUN))]
    candidates = {e.pair_id for e in events if isinstance(e, PairCandidate)}
    last = {e.pair_id: e for e in events if isinstance(e, PairKept | PairDropped)}
    calls = sum(isinstance(e, CallRecorded) for e in events)
    return candidates, last, calls


def test_a_judge_that_always_ties_does_not_keep_every_pair(curated: Path, tmp_path: Path) -> None:
    home = copy_workspace(curated, tmp_path / "ws")
    with App(load_settings(home)) as app:
        sample = _gate(app, TIE_JUDGE, always("tie"))
        candidates, decided, calls = _decisions(app)
    assert candidates
    assert set(decided) == candidates
    assert calls == 2 * len(candidates)  # each pair in both orders
    # It abstains: no pair is kept on its word, and each drop says why.
    assert sample == []
    assert all(isinstance(d, PairDropped) and "abstains" in d.reason for d in decided.values())

    # Counted as wrong (ties = "wrong"), the same verdicts keep every pair, gap 4 included: the
    # pairs are decided anew from the log, and no judge is asked again.
    with App(load_settings(home)) as app:
        strict = _gate(app, TIE_JUDGE, always("tie"), GateRule(ties="wrong"))
        _, decided, calls_after = _decisions(app)
    assert calls_after == calls
    assert all(isinstance(d, PairKept) for d in decided.values())
    assert {p.pair_id for p in strict} == candidates
    assert {p.gap for p in strict} == {1, 2, 3, 4}


@pytest.mark.parametrize(
    ("keep_when", "kept_all"), [("wrong_or_inconsistent", True), ("wrong_both_orders", False)]
)
def test_a_judge_right_in_one_order_and_wrong_in_the_other_is_handled_as_keep_when_says(
    curated: Path, tmp_path: Path, keep_when: KeepWhen, kept_all: bool
) -> None:
    """A judge that always picks the first answer shown is right when the preferred answer comes
    first and wrong when it comes second: it fails every pair, or none, as the rule says."""
    home = copy_workspace(curated, tmp_path / "ws")
    with App(load_settings(home)) as app:
        sample = _gate(app, FIRST_JUDGE, always("A"), GateRule(keep_when=keep_when))
        candidates, decided, _ = _decisions(app)
    kept = {p for p, d in decided.items() if isinstance(d, PairKept)}
    assert kept == (candidates if kept_all else set())
    assert {p.pair_id for p in sample} == kept
    assert all(v.failed is kept_all for p in sample for v in p.judges)


@pytest.mark.parametrize(
    "pairs", [{}, {"keep_when": "wrong_both_orders"}, {"ties": "wrong", "sampling": "stratified"}]
)
def test_the_pairs_settings_decide_what_the_pairs_command_keeps(
    curated: Path, tmp_path: Path, pairs: dict[str, str]
) -> None:
    """``pairs.keep_when`` and ``pairs.ties`` reach ``playlisteval pairs``: each pair is kept
    exactly when, under the configured rule, a judge's recorded verdicts fail it."""
    home = copy_workspace(curated, tmp_path / "ws")
    with App(load_settings(home, pairs=pairs)) as app:
        rule = app.settings.pairs.gate_rule()
        runs.select_pairs(app, RUN)
        events = [s.event() for s in app.events.read_stream(pairs_stream(RUN))]
    verdicts: dict[tuple[str, str], dict[str, str]] = {}
    for event in events:
        if isinstance(event, PairJudged):
            verdicts.setdefault((event.pair_id, event.judge), {})[event.order] = event.choice
    failed = {
        pair
        for (pair, _), orders in verdicts.items()
        if judge_fails(orders["chosen_first"], orders["rejected_first"], rule)
    }
    decided = {e.pair_id: e for e in events if isinstance(e, PairKept | PairDropped)}
    assert decided
    assert {p for p, d in decided.items() if isinstance(d, PairKept)} == failed
    # The log says under which rule each pair was decided, and how the sample was drawn.
    assert {d.rule for d in decided.values()} == {rule.label()}
    sampled = [e for e in events if isinstance(e, PairsSampled)]
    assert sampled
    assert sampled[-1].sampling == pairs.get("sampling", "proportional")


def test_decisions_logged_before_the_rule_was_recorded_read_as_the_first_rule() -> None:
    """Schema 1 of the gate's events (no rule, no sampling) upcasts to what the code did then:
    failed unless right in both orders with ties counted wrong, and stratified sampling."""
    kept = decode_event("PairKept", 1, {"pair_id": "p", "failed_by": ["j"]})
    dropped = decode_event("PairDropped", 1, {"pair_id": "q", "reason": "solved"})
    sampled = decode_event("PairsSampled", 1, {"per_domain": 9, "seed": 0, "pair_ids": ["p"]})
    first = GateRule(keep_when="wrong_or_inconsistent", ties="wrong").label()
    assert isinstance(kept, PairKept)
    assert isinstance(dropped, PairDropped)
    assert isinstance(sampled, PairsSampled)
    assert (kept.rule, dropped.rule, sampled.sampling) == (first, first, "stratified")
    assert kept.schema_version == dropped.schema_version == sampled.schema_version == 2


# -- sampling across rating gaps -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("available", "total", "quotas"),
    [
        ({1: 40, 2: 30, 3: 20, 4: 10}, 20, {1: 8, 2: 6, 3: 4, 4: 2}),
        ({1: 40, 2: 25, 3: 8, 4: 2}, 30, {1: 16, 2: 10, 3: 3, 4: 1}),
        # The pairs still missing after rounding down go to the largest remainders.
        ({1: 4, 2: 3, 3: 2, 4: 1}, 5, {1: 2, 2: 2, 3: 1, 4: 0}),
        ({1: 1, 2: 1, 3: 1}, 2, {1: 1, 2: 1, 3: 0}),
        # Asking for more than there is takes everything.
        ({1: 4, 2: 3}, 90, {1: 4, 2: 3}),
        ({1: 4}, 0, {1: 0}),
    ],
)
def test_proportional_quotas_follow_the_kept_gaps(
    available: dict[int, int], total: int, quotas: dict[int, int]
) -> None:
    assert proportional_quotas(available, total) == quotas


def _kept(domain: str, per_gap: dict[int, int]) -> list[SelectedPair]:
    """Made-up kept pairs of one domain: ``per_gap[g]`` pairs of gap g, each of its own seed."""
    return [
        SelectedPair(
            pair_id=f"pair-{domain}-{gap}-{n}",
            run_id="run-1",
            seed_id=f"{domain}-{gap}-{n}",
            domain=domain,
            chosen_rating=5,
            rejected_rating=5 - gap,
        )
        for gap, count in per_gap.items()
        for n in range(count)
    ]


# Shaped like what survives the gate: mostly small gaps.
SURVIVORS = {"cooking": {1: 40, 2: 25, 3: 8, 4: 2}, "astronomy": {1: 9, 2: 7, 3: 5, 4: 3}}


@pytest.mark.parametrize("per_domain", [10, 15, 30])
def test_sampling_by_default_keeps_the_kept_pairs_gap_proportions(per_domain: int) -> None:
    kept = [pair for domain, gaps in SURVIVORS.items() for pair in _kept(domain, gaps)]
    sample = sample_pairs(kept, per_domain=per_domain, seed=0)
    for domain, gaps in SURVIVORS.items():
        drawn = Counter(p.gap for p in sample if p.domain == domain)
        total = sum(gaps.values())
        assert sum(drawn.values()) == min(per_domain, total)
        for gap, count in gaps.items():
            exact = min(per_domain, total) * count / total
            assert abs(drawn[gap] - exact) < 1, (domain, gap, drawn[gap], exact)


@pytest.mark.parametrize("per_domain", [10, 15, 30])
def test_stratified_sampling_evens_the_gaps_as_far_as_the_kept_pairs_allow(
    per_domain: int,
) -> None:
    kept = [pair for domain, gaps in SURVIVORS.items() for pair in _kept(domain, gaps)]
    sample = sample_pairs(kept, per_domain=per_domain, seed=0, sampling="stratified")
    for domain, gaps in SURVIVORS.items():
        drawn = Counter(p.gap for p in sample if p.domain == domain)
        assert dict(drawn) == {g: n for g, n in gap_quotas(gaps, per_domain).items() if n}
        # A gap short of an even share gives all it has; the others differ by one at most.
        left = [drawn[g] for g in gaps if drawn[g] < gaps[g]]
        assert not left or max(left) - min(left) <= 1
        assert all(drawn[g] <= max(left) for g in gaps if left and drawn[g] == gaps[g])


def test_the_default_and_stratified_samples_differ_where_the_gaps_are_uneven() -> None:
    kept = _kept("cooking", SURVIVORS["cooking"])
    proportional = Counter(p.gap for p in sample_pairs(kept, per_domain=20, seed=0))
    stratified = Counter(
        p.gap for p in sample_pairs(kept, per_domain=20, seed=0, sampling="stratified")
    )
    assert proportional[1] > proportional[2] > proportional[3] >= proportional[4]
    assert stratified[1] == stratified[2] == stratified[3] > stratified[4] == 2
