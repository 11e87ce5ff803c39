"""What the service builds once, while it starts, so that no turn pays for it.

Some of what a turn needs is otherwise built on first use, inside that first turn, on the event
loop: importing the Anthropic SDK with pydantic-ai's Anthropic model (about 1.3 s on a small
machine), hearth's OpenAI-compatible model class (about 80 ms), and the schema of pydantic-ai's
message adapter that stores every round (about 45 ms). Every other request in the process waits
while that happens, so the first burst after a start would stall for over a second. Start-up
pays instead. Only the kinds of providers that can serve are imported: one whose API key is
missing never can in this process (keys are read from the environment), so a service without
an Anthropic key never loads that SDK.
"""

from __future__ import annotations

import importlib

from pydantic_ai.messages import ModelMessagesTypeAdapter

from app.llm.factory import WIRE_MODULES
from app.llm.registry import ModelRegistry


def warm_up(registry: ModelRegistry) -> None:
    """Import the model modules of the providers that can serve, and build the message adapter."""
    kinds = {
        provider.kind
        for provider in registry.providers
        if provider.api_key_env is None or registry.api_key(provider) is not None
    }
    for module in sorted({WIRE_MODULES[kind] for kind in kinds if kind in WIRE_MODULES}):
        importlib.import_module(module)
    ModelMessagesTypeAdapter.rebuild()
