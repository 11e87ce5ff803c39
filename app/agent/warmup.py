"""What the service builds once, while it starts, so that no turn pays for it.

Much of what a turn needs is otherwise built on first use, inside that first turn, on the event
loop: importing the Anthropic SDK with pydantic-ai's Anthropic model (about 1.3 s on a small
machine) and hearth's OpenAI-compatible model class (about 80 ms), building each model with its
HTTP client and certificate store (40-80 ms each), the model's agent with its tool schemas, and
the schema of pydantic-ai's message adapter that stores every round (about 45 ms). Every other
request in the process waits while that happens: the first turn after a start took 1.6-2.6 s
to its first text instead of 0.23 s. Start-up pays instead.

Only what can serve is built: the models the registry reports available now, each importing
its provider's modules as it is built. A provider whose API key is not set never can serve in
this process (keys are read from the environment), so without an Anthropic key that SDK is
never loaded. Local servers (LM Studio, Ollama) become available only once a probe reaches
them, so their models are built on first use. A model that fails to build is left for its
first turn, which reports why.
"""

from __future__ import annotations

import gc
import logging

from pydantic_ai.messages import ModelMessagesTypeAdapter

from app.agent.turn import turn_agent
from app.llm.factory import ModelCache
from app.llm.registry import ModelRegistry

log = logging.getLogger("hearth.warmup")


YOUNG_COLLECTION_EVERY = 10_000
"""Container objects allocated (net) between two collections of the youngest generation;
CPython's default is 700.

A hundred turns at once keep their requests, rounds, events and buffers alive for seconds: at 700,
the collector runs every few hundred microseconds of work, finds most of them still alive and
promotes them, so they pile up in the oldest generation (150,000 objects within a burst) and each
full collection walks them, 100-150 ms with the event loop stopped. Measured (bench/turn_overhead.py
--parts b, 100 turns at once, two bursts of each in turn, twice): 27.1 ms of server CPU per turn at
700, 23.8 ms at 10,000, 24.9 ms at 50,000. What is not garbage by the time of a collection is not
worth collecting sooner; 10,000 young objects are a few MiB at most."""


def settle_heap() -> None:
    """Move everything built at start-up out of the garbage collector's way, and collect the
    young generation less often (`YOUNG_COLLECTION_EVERY`).

    What start-up built lives as long as the process; frozen, full collections stay short
    instead of walking it and pausing a turn for hundreds of milliseconds.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)


def warm_up(registry: ModelRegistry, models: ModelCache) -> None:
    """Build the available models and their agents, and the message adapter."""
    for model in registry.models():
        if registry.is_available(model):
            try:
                models.agent(model, registry, turn_agent)
            except Exception as exc:  # its first turn reports it, as it would have anyway
                log.warning("model %s not built at start: %s", model.id, exc)
    ModelMessagesTypeAdapter.rebuild()
