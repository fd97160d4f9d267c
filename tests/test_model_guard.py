"""The suite cannot reach a model API unless a test opts in (conftest's guard)."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tools.providers.base import ProviderConfig
from tools.providers.dashscope_model import DashScopeModel


def _openai() -> OpenAIChatModel:
    provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    return OpenAIChatModel("gpt-5.4", provider=provider)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(_openai, id="pydantic-ai's OpenAI model"),
        pytest.param(
            lambda: DashScopeModel(
                "qwen-3.7-plus", ProviderConfig(family="dashscope", model_name="qwen3.7-plus")
            ),
            id="our DashScope adapter",
        ),
    ],
)
def test_a_model_request_without_the_opt_in_is_refused(model: object) -> None:
    with pytest.raises(RuntimeError, match="not allowed"):
        Agent(model()).run_sync("hello")  # type: ignore[operator]
