"""Preference pairs: the pure rules (candidates, ids, sampling by gap) and the difficulty gate
end to end on the demo workspace (real SQLite log, real clips, the offline weak judges).

The gate's rule itself (ties, inconsistent judges) and the two samplings are tested in
``tests/test_difficulty_gate.py``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agents.deps import CallDeps
from agents.pairs import accepted_items, load_selection, select_pairs
from playlisteval import runs
from playlisteval.app import App, model_factory
from playlisteval.settings import load_settings
from policies.budget import BudgetExhausted
from policies.pairs import (
    PAPER_GATE,
    GateRule,
    SelectedPair,
    candidate_pairs,
    gap_quotas,
    judge_fails,
    pair_id,
    proportional_quotas,
    rating_pairs,
    sample_pairs,
)
from store.events import (
    CallRecorded,
    CallReserved,
    PairCandidate,
    PairDropped,
    PairJudged,
    PairKept,
    PairsSampled,
    pairs_stream,
)
from tests.workspaces import copy_workspace

RUN = "r1"
JUDGES = ("qwen3-vl-30b-a3b", "internvl3.5-8b")
PER_DOMAIN = 2
SAMPLE_SEED = 7

# -- the pure rules ---------------------------------------------------------------------------


def test_an_item_gives_ten_pairs_the_higher_rating_preferred() -> None:
    pairs = rating_pairs()
    assert len(pairs) == 10 == len(set(pairs))
    assert all(chosen > rejected for chosen, rejected in pairs)
    assert Counter(c - r for c, r in pairs) == {1: 4, 2: 3, 3: 2, 4: 1}
    candidates = candidate_pairs("seed-1", "run-1", "cooking")
    assert [(p.chosen_rating, p.rejected_rating) for p in candidates] == pairs
    assert {(p.seed_id, p.run_id, p.domain) for p in candidates} == {("seed-1", "run-1", "cooking")}
    assert [p.pair_id for p in candidates] == [pair_id("seed-1", c, r) for c, r in pairs]


def test_pair_id_is_the_sha1_of_seed_and_ratings() -> None:
    # sha1("seed-1|5|4") = 7ac6c057f0631ad6b3d1…
    assert pair_id("seed-1", 5, 4) == "pair-7ac6c057f0631ad6"
    assert pair_id("seed-1", 2, 1) == "pair-4444d0f9c753c6c0"


@pytest.mark.parametrize(
    ("available", "total", "quotas"),
    [
        ({1: 40, 2: 30, 3: 20, 4: 10}, 20, {1: 5, 2: 5, 3: 5, 4: 5}),
        # Short gaps give what they have; the rest is shared again among the others.
        ({1: 40, 2: 30, 3: 20, 4: 10}, 90, {1: 30, 2: 30, 3: 20, 4: 10}),
        ({1: 10, 2: 3}, 7, {1: 4, 2: 3}),
        # A remainder goes to the gaps with the most left (the smaller gap on a tie).
        ({1: 12, 2: 9, 3: 6, 4: 3}, 10, {1: 3, 2: 3, 3: 2, 4: 2}),
        ({1: 4, 2: 6}, 5, {1: 2, 2: 3}),
        ({1: 5, 2: 5, 3: 5}, 4, {1: 2, 2: 1, 3: 1}),
        # Asking for more than there is takes everything.
        ({1: 4, 2: 3, 3: 2, 4: 1}, 90, {1: 4, 2: 3, 3: 2, 4: 1}),
        ({1: 4}, 0, {1: 0}),
    ],
)
def test_gap_quotas_are_as_even_as_the_pairs_allow(
    available: dict[int, int], total: int, quotas: dict[int, int]
) -> None:
    assert gap_quotas(available, total) == quotas


def _kept(domain: str, items: int) -> list[SelectedPair]:
    return [
        pair for i in range(items) for pair in candidate_pairs(f"{domain}-{i}", "run-1", domain)
    ]


def test_sampling_stratifies_each_domain_by_gap_and_keeps_a_small_domain_whole() -> None:
    kept = _kept("cooking", 10) + _kept("astronomy", 1) + _kept("woodworking", 3)
    sample = sample_pairs(kept, per_domain=10, seed=0, sampling="stratified")
    per_domain = Counter(p.domain for p in sample)
    assert per_domain == {"cooking": 10, "astronomy": 10, "woodworking": 10}
    by_gap = Counter((p.domain, p.gap) for p in sample)
    # cooking: 40/30/20/10 pairs per gap → 10 = 3 + 3 + 2 + 2 (the remainder to gaps 1 and 2)
    assert [by_gap["cooking", g] for g in (1, 2, 3, 4)] == [3, 3, 2, 2]
    # woodworking: 12/9/6/3 → the same split
    assert [by_gap["woodworking", g] for g in (1, 2, 3, 4)] == [3, 3, 2, 2]
    # astronomy has only its item's ten pairs: all of them.
    assert {p for p in sample if p.domain == "astronomy"} == set(_kept("astronomy", 1))
    assert set(sample) <= set(kept)


def test_sampling_is_deterministic_given_the_seed_whatever_the_input_order() -> None:
    kept = _kept("cooking", 10) + _kept("astronomy", 4)
    first = sample_pairs(kept, per_domain=8, seed=3)
    assert sample_pairs(list(reversed(kept)), per_domain=8, seed=3) == first
    assert sample_pairs(kept, per_domain=8, seed=4) != first
    # A domain's draw does not depend on the other domains.
    alone = sample_pairs(_kept("cooking", 10), per_domain=8, seed=3)
    assert alone == [p for p in first if p.domain == "cooking"]


STRICT = GateRule(keep_when="wrong_or_inconsistent", ties="wrong")


@pytest.mark.parametrize(
    ("chosen_first", "rejected_first", "failed"),
    [
        ("A", "B", False),  # the preferred answer both times
        ("A", "A", True),  # always the first shown: position bias
        ("B", "B", True),
        ("B", "A", True),  # always the worse answer
        ("tie", "B", True),
        ("A", "invalid", True),
    ],
)
def test_with_ties_as_wrong_a_judge_fails_a_pair_unless_it_prefers_the_chosen_answer_twice(
    chosen_first: str, rejected_first: str, failed: bool
) -> None:
    assert judge_fails(chosen_first, rejected_first, STRICT) is failed


# -- the difficulty gate on the demo workspace --------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """A workspace whose run went through pair selection once."""

    home: Path
    returned: list[SelectedPair]


def _select(app: App, **kwargs: Any) -> list[SelectedPair]:
    options: dict[str, Any] = {
        "judges": JUDGES,
        "per_domain": PER_DOMAIN,
        "sample_seed": SAMPLE_SEED,
        **kwargs,
    }
    return anyio.run(
        lambda: select_pairs(
            CallDeps(
                store=app.events,
                catalog=app.catalog,
                clips=app.clips(),
                model_for=model_factory(app.settings, app),
                prices=app.prices(),
            ),
            run_id=RUN,
            offline=True,
            **options,
        )
    )


def _events(app: App) -> list[Any]:
    return [s.event() for s in app.events.read_stream(pairs_stream(RUN))]


def _copy(source: Path, target: Path) -> Path:
    copy_workspace(source, target)
    return target


@pytest.fixture(scope="module")
def curated(demo_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace after a small offline curation run (a few accepted items)."""
    home = _copy(demo_home, tmp_path_factory.mktemp("pairs") / "ws")
    with App(load_settings(home)) as app:
        report = runs.curate(app, budget_usd=5.0, max_seeds=3, run_id=RUN)
    assert len(report.accepted) >= 2, "the demo run accepted too few items to make pairs from"
    return home


@pytest.fixture(scope="module")
def selection(curated: Path, tmp_path_factory: pytest.TempPathFactory) -> Selection:
    """The curated workspace after one pair selection."""
    home = _copy(curated, tmp_path_factory.mktemp("selected") / "ws")
    with App(load_settings(home)) as app:
        returned = _select(app)
    return Selection(home, returned)


def test_every_accepted_item_gives_ten_candidate_pairs(selection: Selection) -> None:
    with App(load_settings(selection.home)) as app:
        items = accepted_items(app.events, RUN)
        candidates = [e for e in _events(app) if isinstance(e, PairCandidate)]
    assert len(items) >= 2
    assert len(candidates) == 10 * len(items) == len({c.pair_id for c in candidates})
    for item in items:
        mine = [c for c in candidates if c.seed_id == item.seed_id]
        assert [(c.chosen_rating, c.rejected_rating) for c in mine] == rating_pairs()
        assert {c.domain for c in mine} == {item.domain}
        assert all(
            c.pair_id == pair_id(c.seed_id, c.chosen_rating, c.rejected_rating) for c in mine
        )


def test_every_judge_call_and_decision_is_an_event(selection: Selection) -> None:
    with App(load_settings(selection.home)) as app:
        events = _events(app)
    candidates = {e.pair_id for e in events if isinstance(e, PairCandidate)}
    judged = Counter((e.pair_id, e.judge, e.order) for e in events if isinstance(e, PairJudged))
    assert set(judged) == {
        (p, j, o) for p in candidates for j in JUDGES for o in ("chosen_first", "rejected_first")
    }
    assert set(judged.values()) == {1}
    calls = [e for e in events if isinstance(e, CallRecorded)]
    assert len(calls) == len(judged)
    assert all(c.role == "pair_judge" and c.gate == "difficulty" and not c.replayed for c in calls)
    assert {c.model for c in calls} == set(JUDGES)
    assert all(c.cost_micros > 0 and c.offline for c in calls)
    # Each call's id names its pair: its cost can be told per pair.
    assert {c.call_id.rsplit(":", 1)[0] for c in calls} == candidates
    decided = [e.pair_id for e in events if isinstance(e, PairKept | PairDropped)]
    assert sorted(decided) == sorted(candidates)
    assert sum(isinstance(e, PairsSampled) for e in events) == 1


def test_a_pair_is_kept_exactly_when_a_judge_fails_it_under_the_default_rule(
    selection: Selection,
) -> None:
    with App(load_settings(selection.home)) as app:
        events = _events(app)
    choices: dict[tuple[str, str], dict[str, str]] = {}
    for e in events:
        if isinstance(e, PairJudged):
            assert e.correct == (e.choice == ("A" if e.order == "chosen_first" else "B"))
            choices.setdefault((e.pair_id, e.judge), {})[e.order] = e.choice
    failing: dict[str, set[str]] = {}
    for (pair, judge), by_order in choices.items():
        if judge_fails(by_order["chosen_first"], by_order["rejected_first"], PAPER_GATE):
            failing.setdefault(pair, set()).add(judge)
    kept = {e.pair_id: e.failed_by for e in events if isinstance(e, PairKept)}
    dropped = {e.pair_id for e in events if isinstance(e, PairDropped)}
    assert kept
    assert dropped
    assert {p: set(f) for p, f in kept.items()} == failing
    assert dropped.isdisjoint(failing)


def test_the_offline_judges_are_weak_on_close_pairs_and_differ_from_each_other(
    selection: Selection,
) -> None:
    with App(load_settings(selection.home)) as app:
        events = _events(app)
    gap = {
        e.pair_id: e.chosen_rating - e.rejected_rating
        for e in events
        if isinstance(e, PairCandidate)
    }
    judged = [e for e in events if isinstance(e, PairJudged)]
    close = [e for e in judged if gap[e.pair_id] <= 2]
    clear = [e for e in judged if gap[e.pair_id] >= 3]

    def failure_rate(verdicts: Sequence[PairJudged]) -> float:
        return sum(not e.correct for e in verdicts) / len(verdicts)

    assert failure_rate(close) > failure_rate(clear)
    assert failure_rate(clear) < 0.2
    choices = {j: {(e.pair_id, e.order): e.choice for e in judged if e.judge == j} for j in JUDGES}
    assert choices[JUDGES[0]] != choices[JUDGES[1]]


def test_the_sample_is_drawn_per_domain_and_by_gap_from_the_kept_pairs(
    selection: Selection, tmp_path: Path
) -> None:
    """Whichever seeds the run curated: the sample takes fewer pairs than the largest domain
    kept, so it has to choose, and it chooses by the gaps' quotas."""
    with App(load_settings(selection.home)) as app:
        events = _events(app)
    candidates = {e.pair_id: e for e in events if isinstance(e, PairCandidate)}
    kept = [candidates[e.pair_id] for e in events if isinstance(e, PairKept)]
    sampled = next(e for e in events if isinstance(e, PairsSampled))
    assert (sampled.per_domain, sampled.seed) == (PER_DOMAIN, SAMPLE_SEED)
    assert sampled.pair_ids == tuple(p.pair_id for p in selection.returned)
    kept_per_domain = Counter(k.domain for k in kept)
    per_domain = max(kept_per_domain.values()) - 1
    assert per_domain >= 1, f"no domain kept two pairs to choose between: {kept_per_domain}"

    home = _copy(selection.home, tmp_path / "ws")
    for sampling, quotas_of in (("proportional", proportional_quotas), ("stratified", gap_quotas)):
        with App(load_settings(home)) as app:
            returned = _select(app, per_domain=per_domain, sampling=sampling)
        assert {p.pair_id for p in returned} <= {k.pair_id for k in kept}
        for domain, count in kept_per_domain.items():
            gaps = Counter(k.chosen_rating - k.rejected_rating for k in kept if k.domain == domain)
            drawn = Counter(p.gap for p in returned if p.domain == domain)
            assert sum(drawn.values()) == min(per_domain, count)
            assert {g: drawn[g] for g in gaps} == quotas_of(dict(gaps), per_domain), sampling
        for pair in returned:
            assert [v.judge for v in pair.judges] == sorted(JUDGES)
            assert any(v.failed for v in pair.judges)
            assert all(
                v.failed == judge_fails(v.verdict_chosen_first, v.verdict_rejected_first)
                for v in pair.judges
            )


def test_a_second_selection_judges_nothing_and_returns_the_same_pairs(
    selection: Selection,
) -> None:
    with App(load_settings(selection.home)) as app:
        before = app.events.stream_version(pairs_stream(RUN))
        again = _select(app)
        assert app.events.stream_version(pairs_stream(RUN)) == before
        assert again == selection.returned
        assert load_selection(app.events, RUN) == selection.returned


def test_load_selection_is_empty_before_any_selection(curated: Path) -> None:
    with App(load_settings(curated)) as app:
        assert load_selection(app.events, RUN) == []


def test_a_selection_stopped_by_the_budget_resumes_without_judging_twice(
    curated: Path, selection: Selection, tmp_path: Path
) -> None:
    with App(load_settings(selection.home)) as app:
        reference = _events(app)
    worst = max(e.reserved_micros for e in reference if isinstance(e, CallReserved))
    total = sum(isinstance(e, PairJudged) for e in reference)
    home = _copy(curated, tmp_path / "ws")
    with App(load_settings(home)) as app:
        with pytest.raises(BudgetExhausted):
            _select(app, budget_micros=6 * worst)
        partial = _events(app)
        done = [e for e in partial if isinstance(e, PairJudged)]
        assert 0 < len(done) < total
        assert not any(isinstance(e, PairsSampled) for e in partial)
        resumed = _select(app)
        events = _events(app)
    judged = Counter((e.pair_id, e.judge, e.order) for e in events if isinstance(e, PairJudged))
    assert set(judged.values()) == {1}
    live = [e for e in events if isinstance(e, CallRecorded) and not e.replayed]
    assert len(live) == len(judged)
    assert resumed == selection.returned


def test_calls_recorded_before_a_crash_are_served_from_the_log(
    curated: Path, selection: Selection, tmp_path: Path
) -> None:
    """A crash after every judge call was recorded but before any verdict was written: the
    next selection pays for no call again and decides the same."""
    with App(load_settings(selection.home)) as app:
        recorded = [
            e for e in _events(app) if isinstance(e, PairCandidate | CallReserved | CallRecorded)
        ]
    home = _copy(curated, tmp_path / "ws")
    with App(load_settings(home)) as app:
        app.events.append(pairs_stream(RUN), recorded)
        resumed = _select(app)
        events = _events(app)[len(recorded) :]
    calls = [e for e in events if isinstance(e, CallRecorded)]
    assert calls
    assert all(c.replayed for c in calls)
    assert not any(isinstance(e, CallReserved) for e in events)
    assert resumed == selection.returned


# -- the gate against a vLLM server of a 32k context ---------------------------------------------


@pytest.mark.usefixtures("allow_model_requests")
def test_both_open_weight_judges_answer_every_pair_within_a_32k_vllm_context(
    curated: Path, tmp_path: Path
) -> None:
    """InternVL3.5-8B and Qwen3-VL-30B-A3B behind a vLLM-like server of ``max_model_len`` 32768
    (read from its ``/v1/models``; the fake refuses longer requests with vLLM's 400): each
    request's frames are fitted to the window, so both judges answer every pair in both orders,
    and each ``PairJudged`` says the frames and rate its judge saw — what the server got."""
    from playlisteval.app import traffic_for
    from tests.fakes_openai import openai_compatible_harness

    home = _copy(curated, tmp_path / "ws")
    with openai_compatible_harness() as harness:
        settings = load_settings(
            home,
            curation={"offline": False},
            providers={
                "openai_compatible": {
                    "base_url": f"{harness.server.base_url}/v1",
                    "max_retries": 0,
                }
            },
        )
        with App(settings) as app:
            deps = CallDeps(
                store=app.events,
                catalog=app.catalog,
                clips=app.clips(),
                model_for=model_factory(settings, app, set(JUDGES)),
                prices=app.prices(),
                traffic=traffic_for(settings, live=True),
            )
            anyio.run(
                lambda: select_pairs(
                    deps,
                    run_id=RUN,
                    judges=JUDGES,
                    per_domain=PER_DOMAIN,
                    sample_seed=SAMPLE_SEED,
                )
            )
            events = _events(app)
        requests = harness.model_requests()
        sent = [
            (r.json()["model"], sum(1 for m in harness.media(r) if m["kind"] == "image"))
            for r in requests
        ]
        videos = [
            sum(m["frames"] for m in harness.media(r) if m["kind"] == "video") for r in requests
        ]
    candidates = {e.pair_id for e in events if isinstance(e, PairCandidate)}
    judged = [e for e in events if isinstance(e, PairJudged)]
    assert {(e.pair_id, e.judge, e.order) for e in judged} == {
        (p, j, o) for p in candidates for j in JUDGES for o in ("chosen_first", "rejected_first")
    }
    assert len(requests) == len(judged)  # no request refused and made again
    assert not [e for e in events if type(e).__name__ == "CallFailed"]
    # Each record names both segments, with the frames and rate its judge was shown.
    for event in judged:
        assert len(event.video) == 2
        assert all(v["frames"] >= 1 and v["fps"] > 0 for v in event.video)
    shown = {
        j: sum(sum(v["frames"] for v in e.video) for e in judged if e.judge == j) for j in JUDGES
    }
    # What the server got: InternVL's frames as pictures, Qwen3-VL's as the frames of its videos.
    internvl = sum(n for model, n in sent if "InternVL" in model)
    qwen = sum(n for (model, _), n in zip(sent, videos, strict=True) if "Qwen3-VL" in model)
    assert internvl == shown["internvl3.5-8b"]
    assert qwen == shown["qwen3-vl-30b-a3b"]
    # InternVL's frames cost ~13 tiles each at worst: fewer of them fit than of Qwen3-VL's.
    assert shown["internvl3.5-8b"] < shown["qwen3-vl-30b-a3b"]
