"""Transcript backends give one text per chunk, "" for silence, and say which chunk failed."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from playlisteval.app import build_transcriber
from playlisteval.settings import load_settings
from store.errors import ConfigError, TranscriptError
from tests.fakes_dashscope import API_KEY as DASHSCOPE_KEY
from tests.fakes_dashscope import dashscope_harness
from tests.tiny_models import tiny_qwen_tokenizer
from tools.index.transcripts import (
    AutoTranscriber,
    CaptionsTranscriber,
    DashScopeTranscriber,
    TranscriptRequest,
    make_transcriber,
)
from tools.providers.dashscope_model import DEFAULT_BASE_URL

GRID = [(0.0, 30.0), (30.0, 60.0), (60.0, 90.0)]


def _vtt(text: str, start: str = "00:00:01.000", end: str = "00:00:02.000") -> str:
    return f"WEBVTT\n\n{start} --> {end}\n{text}\n"


def _audio(loud_until: float) -> Callable[[float, float], np.ndarray]:
    """Noise before ``loud_until`` seconds, digital silence after."""
    rng = np.random.default_rng(0)

    def read(start: float, end: float) -> np.ndarray:
        samples = int((end - start) * 16_000)
        if start < loud_until:
            return (rng.standard_normal(samples) * 0.1).astype(np.float32)
        return np.zeros(samples, dtype=np.float32)

    return read


# ----------------------------------------------------------------------------------------------
# Captions


@pytest.mark.parametrize(
    ("files", "expected_first_chunk"),
    [
        pytest.param({"v.en.vtt": _vtt("manual vtt")}, "manual vtt", id="single-vtt"),
        pytest.param(
            {
                "v.en.auto.vtt": _vtt("auto vtt"),
                "v.en.srt": "1\n00:00:01,000 --> 00:00:02,000\nsrt\n",
            },
            "srt",
            id="manual-srt-beats-auto-vtt",
        ),
        pytest.param(
            {"v.en.srt": "1\n00:00:01,000 --> 00:00:02,000\nsrt\n", "v.en.vtt": _vtt("vtt")},
            "vtt",
            id="vtt-beats-srt",
        ),
        pytest.param(
            {"v.en.vtt": "WEBVTT\n\nbroken", "v.en.auto.vtt": _vtt("auto")},
            "auto",
            id="broken-manual-falls-to-auto",
        ),
    ],
)
def test_captions_backend_uses_best_readable_file(
    tmp_path: Path, files: dict[str, str], expected_first_chunk: str
) -> None:
    paths = []
    for name, content in files.items():
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        paths.append(path)
    texts = CaptionsTranscriber().transcribe(TranscriptRequest(grid=GRID, caption_paths=paths))
    assert texts == [expected_first_chunk, "", ""]


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        pytest.param({}, "names no caption file", id="none"),
        pytest.param({"v.vtt": "WEBVTT\n"}, "no parsable cue", id="empty-vtt"),
        pytest.param({"v.ass": "[Script Info]"}, "not .vtt or .srt", id="unsupported-format"),
    ],
)
def test_captions_backend_without_usable_file_says_why(
    tmp_path: Path, files: dict[str, str], reason: str
) -> None:
    paths = []
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        paths.append(tmp_path / name)
    with pytest.raises(TranscriptError, match=reason):
        CaptionsTranscriber().transcribe(TranscriptRequest(grid=GRID, caption_paths=paths))


# ----------------------------------------------------------------------------------------------
# DashScope against a local fake of its HTTP API


class _FakeDashScope(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    authorizations: list[str]
    fail_status: int | None = None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, "body": body})
        self.authorizations.append(self.headers.get("Authorization", ""))
        if self.fail_status is not None:
            payload: dict[str, Any] = {
                "code": "InternalError",
                "message": "upstream exploded",
                "request_id": "r1",
            }
            status = self.fail_status
        else:
            audio = body["input"]["messages"][0]["content"][0]["audio"]
            text = f"heard {len(audio)} chars"
            payload = {
                "request_id": "r1",
                "output": {
                    "choices": [
                        {
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": [{"text": text}]},
                        }
                    ]
                },
                "usage": {"input_tokens": 1, "output_tokens": 2},
            }
            status = 200
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def fake_dashscope() -> Iterator[tuple[str, type[_FakeDashScope]]]:
    handler = type("Handler", (_FakeDashScope,), {"requests": [], "authorizations": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/api/v1", handler
    server.shutdown()
    server.server_close()


def test_dashscope_sends_voiced_chunks_inline_and_skips_silence(
    fake_dashscope: tuple[str, type[_FakeDashScope]],
) -> None:
    url, handler = fake_dashscope
    backend = make_transcriber("dashscope", api_key="sk-secret", base_url=url)
    texts = backend.transcribe(TranscriptRequest(grid=GRID, audio=_audio(60.0), language="en"))
    assert [text.startswith("heard") for text in texts] == [True, True, False]
    assert texts[2] == ""
    assert len(handler.requests) == 2
    first = handler.requests[0]
    assert first["path"].endswith("/services/aigc/multimodal-generation/generation")
    assert first["body"]["model"] == "qwen3-asr-flash"
    assert first["body"]["parameters"]["asr_options"]["language"] == "en"
    assert first["body"]["input"]["messages"][0]["content"][0]["audio"].startswith(
        "data:audio/wav;base64,"
    )
    assert handler.authorizations == ["Bearer sk-secret", "Bearer sk-secret"]
    assert "sk-secret" not in repr(backend)


def test_dashscope_error_names_chunk_and_hides_key(
    fake_dashscope: tuple[str, type[_FakeDashScope]],
) -> None:
    url, handler = fake_dashscope
    handler.fail_status = 400
    backend = make_transcriber("dashscope", api_key="sk-secret", base_url=url)
    with pytest.raises(TranscriptError, match=r"dashscope failed on chunk 0.*400") as caught:
        backend.transcribe(TranscriptRequest(grid=GRID, audio=_audio(90.0)))
    assert "sk-secret" not in str(caught.value)


def test_dashscope_without_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        make_transcriber("dashscope")


def test_dashscope_asr_goes_to_the_configured_generation_endpoint_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``index.transcriber = "dashscope"`` transcribes where ``[providers.dashscope]`` sends
    generation, with that block's key: DashScope's regions take different keys."""
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    monkeypatch.setenv("QWEN_REGION_KEY", DASHSCOPE_KEY)
    with dashscope_harness() as harness:
        dashscope = {
            "base_url": f"{harness.server.base_url}/api/v1",
            "api_key_env": "QWEN_REGION_KEY",
        }
        settings = load_settings(
            tmp_path, index={"transcriber": "dashscope"}, providers={"dashscope": dashscope}
        )
        texts = build_transcriber(settings).transcribe(
            TranscriptRequest(grid=GRID, audio=_audio(60.0))
        )
        requests = harness.model_requests()
    assert len(requests) == 2  # the two voiced chunks; the silent one is not sent
    assert {r.json()["model"] for r in requests} == {"qwen3-asr-flash"}
    assert {r.headers["Authorization"] for r in requests} == {f"Bearer {DASHSCOPE_KEY}"}
    assert texts[0]
    assert texts[2] == ""


def test_dashscope_asr_defaults_to_the_region_generation_defaults_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the SDK's own default (Beijing): the international endpoint generation uses."""
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-test")
    backend = build_transcriber(load_settings(tmp_path, index={"transcriber": "dashscope"}))
    assert isinstance(backend, DashScopeTranscriber)
    assert backend.base_url == DEFAULT_BASE_URL == "https://dashscope-intl.aliyuncs.com/api/v1"
    assert DashScopeTranscriber(api_key="k").base_url == DEFAULT_BASE_URL


# ----------------------------------------------------------------------------------------------
# Auto: captions first, a speech backend otherwise


@pytest.mark.parametrize(
    ("caption", "backend", "note"),
    [
        pytest.param(_vtt("from captions"), "captions", "", id="usable-captions"),
        pytest.param("not a caption file", "dashscope", "captions unreadable", id="broken"),
        pytest.param(None, "dashscope", "no caption file", id="no-captions"),
    ],
)
def test_auto_prefers_captions_and_records_why_it_fell_back(
    tmp_path: Path,
    fake_dashscope: tuple[str, type[_FakeDashScope]],
    caption: str | None,
    backend: str,
    note: str,
) -> None:
    url, _handler = fake_dashscope
    paths = []
    if caption is not None:
        (tmp_path / "v.en.vtt").write_text(caption, encoding="utf-8")
        paths.append(tmp_path / "v.en.vtt")
    auto = make_transcriber(
        "auto", fallback="dashscope", fallback_options={"api_key": "k", "base_url": url}
    )
    assert isinstance(auto, AutoTranscriber)
    request = TranscriptRequest(grid=GRID, caption_paths=paths, audio=_audio(30.0))
    texts = auto.transcribe(request)
    assert len(texts) == len(GRID)
    assert auto.last_outcome is not None
    assert auto.last_outcome.backend == backend
    assert note in auto.last_outcome.note
    if backend == "dashscope":
        assert auto.last_outcome.note.endswith("used dashscope")


# ----------------------------------------------------------------------------------------------
# Local speech models


def test_speech_backend_without_audio_source_is_a_transcript_error(
    fake_dashscope: tuple[str, type[_FakeDashScope]],
) -> None:
    url, _handler = fake_dashscope
    backend = DashScopeTranscriber(api_key="k", base_url=url)
    with pytest.raises(TranscriptError, match="no audio source"):
        backend.transcribe(TranscriptRequest(grid=GRID))


def test_audio_reader_failure_names_the_chunk(
    fake_dashscope: tuple[str, type[_FakeDashScope]],
) -> None:
    url, _handler = fake_dashscope

    def broken(start: float, end: float) -> np.ndarray:
        if start >= 30:
            raise OSError("disk gone")
        return np.zeros(int((end - start) * 16_000), dtype=np.float32)

    backend = DashScopeTranscriber(api_key="k", base_url=url)
    with pytest.raises(TranscriptError, match=r"chunk 1 \(30.0-60.0 s\).*disk gone"):
        backend.transcribe(TranscriptRequest(grid=GRID, audio=broken))


def test_faster_whisper_with_missing_model_folder_is_a_transcript_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match=r"whisper model '.*no-model' is neither a folder"):
        make_transcriber("faster-whisper", model=str(tmp_path / "no-model"))


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        pytest.param("whisper-x", {}, "unknown transcriber", id="unknown-name"),
        pytest.param("captions", {"colour": "red"}, "bad options", id="unknown-option"),
        pytest.param("auto", {"fallback": "captions"}, "speech-to-text", id="auto-captions"),
    ],
)
def test_make_transcriber_rejects_bad_configuration(
    name: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        make_transcriber(name, **options)


_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
    "<asr_text>",
]
_ASR_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}{{ '\\n' }}"
    "{% if message.content is string %}{{ message.content }}{% else %}"
    "{% for item in message.content %}{% if item.type == 'audio' %}"
    "<|audio_start|><|audio_pad|><|audio_end|>{% elif item.type == 'text' %}{{ item.text }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_qwen3_asr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised Qwen3-ASR with a tiny byte-level BPE tokenizer, saved to disk."""
    import torch
    from qwen_asr.core.transformers_backend import (
        Qwen3ASRConfig,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )
    from transformers import WhisperFeatureExtractor

    tokenizer = tiny_qwen_tokenizer(
        _SPECIAL,
        "language English system user assistant hello world",
        vocab_size=350,
        extra_special_tokens={
            "audio_token": "<|audio_pad|>",
            "audio_bos_token": "<|audio_start|>",
            "audio_eos_token": "<|audio_end|>",
        },
    )
    processor = Qwen3ASRProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=128),
        tokenizer=tokenizer,
        chat_template=_ASR_TEMPLATE,
    )
    config = Qwen3ASRConfig(
        thinker_config={
            "audio_config": {
                "num_mel_bins": 128,
                "encoder_layers": 1,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 64,
                "d_model": 32,
                "output_dim": 64,
                "downsample_hidden_size": 8,
                "n_window": 50,
                "n_window_infer": 800,
            },
            "text_config": {
                "vocab_size": len(tokenizer),
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "rope_scaling": {
                    "rope_type": "default",
                    "mrope_section": [8, 4, 4],
                    "interleaved": True,
                },
            },
            "audio_token_id": tokenizer.convert_tokens_to_ids("<|audio_pad|>"),
            "audio_start_token_id": tokenizer.convert_tokens_to_ids("<|audio_start|>"),
        }
    )
    torch.manual_seed(0)
    model_dir = tmp_path_factory.mktemp("qwen3-asr-tiny")
    Qwen3ASRForConditionalGeneration(config).save_pretrained(model_dir)
    processor.save_pretrained(model_dir)
    return model_dir


@pytest.mark.slow
@pytest.mark.parametrize(
    ("loud_until", "language", "expected_empty"),
    [
        pytest.param(90.0, None, [False, False, False], id="all-voiced"),
        pytest.param(30.0, "en", [False, True, True], id="silent-tail-forced-language"),
        pytest.param(0.0, None, [True, True, True], id="all-silent-skips-model"),
    ],
)
def test_qwen3_asr_on_tiny_random_model_returns_one_text_per_chunk(
    tiny_qwen3_asr: Path, loud_until: float, language: str | None, expected_empty: list[bool]
) -> None:
    backend = make_transcriber(
        "qwen3-asr", model=str(tiny_qwen3_asr), dtype="float32", max_new_tokens=4
    )
    texts = backend.transcribe(
        TranscriptRequest(grid=GRID, audio=_audio(loud_until), language=language)
    )
    assert len(texts) == len(GRID)
    assert all(isinstance(text, str) for text in texts)
    # A random model may emit nothing for a voiced chunk, so only silence is pinned down.
    for text, empty in zip(texts, expected_empty, strict=True):
        if empty:
            assert text == ""
    # qwen-asr's nagisa turns flush-to-zero on when it loads; the backend turns it off again, so
    # the process keeps subnormal floats (hypothesis, and any numerics after indexing, need them).
    assert sys.float_info.min / 2 > 0, "loading qwen-asr left flush-to-zero on"


def test_qwen3_asr_with_missing_model_is_a_transcript_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="qwen3-asr: cannot load model"):
        make_transcriber("qwen3-asr", model=str(tmp_path / "absent"))


# ----------------------------------------------------------------------------------------------
# faster-whisper on a tiny random Whisper, converted with CTranslate2's own converter

_WHISPER_WORDS = [
    "the",
    "a",
    "and",
    "of",
    "to",
    "in",
    "is",
    "it",
    "you",
    "that",
    "he",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "at",
]
_WHISPER_LANGUAGES = ["<|en|>", "<|de|>", "<|fr|>"]
# faster-whisper's Tokenizer and CTranslate2's Whisper replica look these up by name.
_WHISPER_SPECIAL_HEAD = ["<|endoftext|>", "<|startoftranscript|>"]
_WHISPER_SPECIAL_TAIL = [
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nospeech|>",
    "<|notimestamps|>",
]
# The converter fills the vocabulary up to ``vocab_size`` with timestamp tokens <|0.00|>, ….
_WHISPER_TIMESTAMPS = 1501


def _tiny_whisper(root: Path, multilingual: bool) -> Path:
    """Build, save and convert a random two-layer Whisper; return the CTranslate2 folder."""
    import ctranslate2
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        WhisperConfig,
        WhisperForConditionalGeneration,
    )

    vocab = {"<|unk|>": 0}
    if multilingual:
        # CTranslate2 4.8 calls a Whisper vocabulary multilingual when it holds the empty token.
        vocab[""] = len(vocab)
    for word in _WHISPER_WORDS:
        vocab[word] = len(vocab)
    languages = _WHISPER_LANGUAGES if multilingual else []
    special = [*_WHISPER_SPECIAL_HEAD, *languages, *_WHISPER_SPECIAL_TAIL]
    word_level = Tokenizer(models.WordLevel(vocab, unk_token="<|unk|>"))
    word_level.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    word_level.decoder = decoders.WordPiece()  # joins words with spaces
    word_level.add_special_tokens([AddedToken(token, normalized=False) for token in special])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=word_level,
        unk_token="<|unk|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in special}
    # Timestamps start right after <|notimestamps|>, as faster-whisper and CTranslate2 assume.
    assert ids["<|notimestamps|>"] == len(tokenizer) - 1
    eot = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer) + _WHISPER_TIMESTAMPS,
        num_mel_bins=80,
        d_model=64,
        encoder_layers=2,
        encoder_attention_heads=2,
        decoder_layers=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    # A generation config built from the model config is rebuilt on load and loses lang_to_id,
    # which the converter turns into the lang_ids that language detection scores.
    model.generation_config = GenerationConfig(
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
        lang_to_id={token: ids[token] for token in languages},
        is_multilingual=multilingual,
    )
    hf_dir = root / "hf"
    model.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)
    features = {"feature_size": 80, "sampling_rate": 16_000, "hop_length": 160, "n_fft": 400}
    (hf_dir / "preprocessor_config.json").write_text(json.dumps(features), encoding="utf-8")
    ct2_dir = root / "ct2"
    ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(ct2_dir), force=True)
    for name in ("tokenizer.json", "preprocessor_config.json"):
        (ct2_dir / name).write_bytes((hf_dir / name).read_bytes())
    return ct2_dir


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """CTranslate2 folders of a tiny random English-only and a multilingual Whisper."""
    return {
        kind: _tiny_whisper(tmp_path_factory.mktemp(f"whisper-{kind}"), kind == "multilingual")
        for kind in ("english", "multilingual")
    }


def _tone_with_silent_middle(start: float, end: float) -> np.ndarray:
    """A noisy 440 Hz tone, except digital silence from 30 s to 45 s."""
    samples = int((end - start) * 16_000)
    if 30.0 <= start < 45.0:
        return np.zeros(samples, dtype=np.float32)
    t = start + np.arange(samples) / 16_000
    noise = np.random.default_rng(int(start)).standard_normal(samples)
    return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * noise).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "compute_type", "language", "batch_size"),
    [
        pytest.param("english", "int8", "en", 1, id="english-int8-one-at-a-time"),
        pytest.param("english", "float32", None, 8, id="english-float32-no-language-batched"),
        pytest.param("multilingual", "int8", "en", 8, id="multilingual-forced-language-batched"),
        pytest.param("multilingual", "float32", None, 1, id="multilingual-detects-language"),
        pytest.param("multilingual", "auto", None, 2, id="multilingual-detects-batched"),
    ],
)
def test_faster_whisper_on_tiny_random_model_returns_one_text_per_chunk(
    tiny_whisper: dict[str, Path],
    kind: str,
    compute_type: str,
    language: str | None,
    batch_size: int,
) -> None:
    from tools.index.transcripts import FasterWhisperTranscriber

    backend = FasterWhisperTranscriber(
        model=tiny_whisper[kind],
        device="cpu",
        compute_type=compute_type,
        cpu_threads=2,
        batch_size=batch_size,
    )
    assert backend._model.model.is_multilingual is (kind == "multilingual")
    grid = [(0.0, 30.0), (30.0, 45.0), (45.0, 60.0)]
    texts = backend.transcribe(
        TranscriptRequest(grid=grid, audio=_tone_with_silent_middle, rate=16_000, language=language)
    )
    # A random model says random words (or none), so only the shape and the silence are pinned.
    assert len(texts) == len(grid)
    assert all(isinstance(text, str) for text in texts)
    assert texts[1] == ""
    for text in texts:
        assert text == " ".join(text.split())
        assert set(text.split()) <= set(_WHISPER_WORDS) | {"<|unk|>"}


def test_faster_whisper_with_broken_model_folder_is_a_transcript_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}", encoding="utf-8")
    (broken / "model.bin").write_bytes(b"not a CTranslate2 model")
    with pytest.raises(TranscriptError, match=r"^faster-whisper: cannot load model .*broken"):
        make_transcriber("faster-whisper", model=str(broken))


@pytest.mark.parametrize(
    ("code", "expected"),
    [("en", "en"), ("EN", "en"), ("en-US", "en"), ("pt_BR", "pt"), ("", None), (None, None)],
)
def test_whisper_gets_the_primary_language_subtag(code: str | None, expected: str | None) -> None:
    from tools.index.transcripts import whisper_language

    assert whisper_language(code) == expected


@pytest.mark.parametrize(
    ("backend", "module"),
    [("FasterWhisperTranscriber", "faster_whisper"), ("Qwen3AsrTranscriber", "qwen_asr")],
)
def test_a_missing_optional_package_names_the_extra_to_install(
    backend: str, module: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the package, the error says to install the `asr` extra, not that the model
    folder is in the wrong format."""
    import tools.index.transcripts as transcripts

    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package imports as
    with pytest.raises(TranscriptError, match=r"not installed.*\[asr\]") as caught:
        getattr(transcripts, backend)(tmp_path)
    assert "ct2-transformers-converter" not in str(caught.value)
