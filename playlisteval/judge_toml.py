"""The settings that make a model id an evaluation judge, as TOML to paste: what ``eval`` prints
when a live judge is not configured (its endpoint, id and price), or the ``real-local`` form for a
model file on this machine."""

from __future__ import annotations


def local_judge_path(judge: str) -> str | None:
    """What ``local_path`` a judge id seems to name a model file on this machine by: the id
    itself when it is a ``.gguf`` file (its absolute path when it is there: the setting is read
    from wherever a command runs) or a packaged model, the packaged model it begins (as
    ``qwen2.5-coder-1.5b`` begins ``qwen2.5-coder-1.5b-instruct``); None otherwise."""
    from pathlib import Path

    from tools.runtime.gguf_models import PACKAGED_MODELS

    if judge in PACKAGED_MODELS:
        return judge
    if judge.endswith(".gguf"):
        found = Path(judge).expanduser()
        return str(found.resolve()) if found.is_file() else judge
    begun = sorted(name for name in PACKAGED_MODELS if name.startswith(judge))
    return begun[0] if len(begun) == 1 else None


def judge_toml(judge: str) -> str:
    """The settings that make ``judge`` an evaluation judge: a real model run on this machine
    (``real-local``: keyless, priced at zero with no row) when the id names one
    (:func:`local_judge_path`); else where it is served, by which family, as which id, at what
    price (zero for a server of one's own), and the local form as the other choice."""
    local = local_judge_path(judge)
    real_local = (
        f'[providers.models."{judge}"]\n'
        'family = "real-local"   # a real text model run on this machine: free, no key, no price\n'
        f'local_path = "{local or "/path/to/model.gguf"}"   # a .gguf file, a model folder or a '
        "packaged model\n"
    )
    if local is not None:
        return real_local
    return (
        f'[providers.models."{judge}"]\n'
        'family = "openai-compatible"            # or gemini, openai, dashscope\n'
        'base_url = "http://localhost:8000/v1"   # a vLLM server\'s …/v1\n'
        f'model_name = "{judge}"                 # the id the server serves it as\n'
        "\n"
        f'[budget.price_overrides."{judge}"]\n'
        "input_per_mtok = 0.0   # USD per million tokens: 0 for a local server\n"
        "output_per_mtok = 0.0\n"
        "\n"
        "# or, for a text model file on this machine (judges transcript-only conditions):\n"
        + "".join(f"# {line}\n" for line in real_local.splitlines())
    )
