"""Closing the live adapters a use case opened, once its work is over."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from pydantic_ai.models import Model

from tools.providers.registry import release_models

T = TypeVar("T")


async def then_release(model_for: Callable[[str], Model], work: Awaitable[T]) -> T:
    """``work``, then the live adapters behind ``model_for`` closed: their connections (an
    unclosed SDK client closes itself when collected, on whatever event loop then runs, and
    fails if its own is gone), and the whole-source uploads Gemini holds against the project's
    file quota (a resumed run uploads again)."""
    try:
        return await work
    finally:
        with anyio.CancelScope(shield=True):
            await release_models(model_for)
