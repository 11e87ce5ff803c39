"""What a worker does as it starts: load the configured providers' model modules and build the
available models before any turn does, sweep away upload folders that an interrupted process
left behind, and set the garbage collector for a server's heap.

Each case runs in a fresh interpreter, since this one has long imported everything: the app is
started (its lifespan, as uvicorn runs it) on a providers file, and what the process has loaded
by then is read from `sys.modules`; an orphan upload folder planted before the start must be
gone once the start-up sweep has run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from app.agent.warmup import YOUNG_COLLECTION_EVERY
from app.files.sweep import STALE_SECONDS

OPENAI_ONLY = """
providers:
  - {id: demo, kind: demo, models: [{id: scripted}]}
  - {id: openai, kind: openai, api_key_env: K_OPENAI, models: [{id: gpt, capabilities: [vision]}]}
"""
WITH_ANTHROPIC = (
    OPENAI_ONLY
    + """\
  - id: anthropic
    kind: anthropic
    api_key_env: K_ANTHROPIC
    base_url: http://127.0.0.1:9/anthropic
    models: [{id: claude, capabilities: [vision, document, tool_search]}]
"""
)

PROBE = """
import asyncio, gc, json, os, sys

from pydantic_ai.messages import ModelMessagesTypeAdapter

from app.llm import factory
from app.llm.factory import build_model
from app.llm.media_policy import Policy
from app.main import create_app

BUILT = []


def recording_build(model, registry):
    BUILT.append(model.id)
    return build_model(model, registry)


factory.build_model = recording_build  # what the model cache builds, as it builds it


async def main() -> None:
    app = create_app()
    before = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
    async with app.router.lifespan_context(app):
        heap = {"before": before, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
        started = {
            name: name in sys.modules
            for name in ("anthropic", "app.llm.wire.anthropic", "app.llm.wire.openai")
        }
        complete = ModelMessagesTypeAdapter.pydantic_complete
        registry = app.state.services.registry
        built = sorted(BUILT)
        policy = Policy.of(build_model(registry.get("openai/gpt"), registry))
        # The start-up sweep runs in the background: wait for it, unless it has ended already.
        for task in asyncio.all_tasks():
            if task.get_name() == "sweep unfinished uploads":
                await asyncio.wait_for(task, 10)
        swept = not os.path.exists(os.environ["ORPHAN"])
        kept = os.path.exists(os.environ["FRESH"])
    print(json.dumps({
        "swept": swept,
        "fresh_kept": kept,
        "started": started,
        "adapter_complete": complete,
        "built": built,
        "openai_policy": sorted(policy.capabilities),
        "anthropic_after_policy": "anthropic" in sys.modules,
        "heap": heap,
    }))


asyncio.run(main())
"""


def started_with(tmp_path: Path, providers: str, **keys: str) -> dict[str, object]:
    (tmp_path / "providers.yaml").write_text(providers)
    (tmp_path / "mcp.yaml").write_text("servers: []\n")
    env = {
        **os.environ,
        "HEARTH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'hearth.db'}",
        "HEARTH_DATA_DIR": str(tmp_path / "data"),
        "HEARTH_PROVIDERS_FILE": str(tmp_path / "providers.yaml"),
        "HEARTH_MCP_FILE": str(tmp_path / "mcp.yaml"),
        "K_OPENAI": "o",
        **keys,
    }
    uploads = tmp_path / "data" / "users" / str(uuid.uuid4()) / "uploads"
    orphan, fresh = uploads / str(uuid.uuid4()), uploads / str(uuid.uuid4())
    for folder in (orphan, fresh):
        folder.mkdir(parents=True)
        (folder / ".partial-x").write_bytes(b"half")
    aged = time.time() - STALE_SECONDS - 60
    os.utime(orphan / ".partial-x", (aged, aged))
    os.utime(orphan, (aged, aged))
    env |= {"ORPHAN": str(orphan), "FRESH": str(fresh)}
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"], cwd=root, env=env, check=True, timeout=120
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_only_the_configured_providers_are_loaded_and_orphan_uploads_are_swept(
    tmp_path: Path,
) -> None:
    report = started_with(tmp_path, OPENAI_ONLY)
    assert report["started"] == {
        "anthropic": False,
        "app.llm.wire.anthropic": False,
        "app.llm.wire.openai": True,
    }
    assert report["adapter_complete"] is True
    assert report["built"] == ["demo/scripted", "openai/gpt"]
    assert (report["swept"], report["fresh_kept"]) == (True, True)
    assert report["openai_policy"] == ["vision"]
    assert report["anthropic_after_policy"] is False  # asking about a model loads nothing
    # What start-up built is frozen out of the collector's way, and the young generation is
    # collected every YOUNG_COLLECTION_EVERY allocations instead of CPython's 700.
    heap = report["heap"]
    assert heap["before"] == {"threshold": [700, 10, 10], "frozen": 0}
    assert heap["threshold"] == [YOUNG_COLLECTION_EVERY, 10, 10]
    assert heap["frozen"] > 10_000


@pytest.mark.slow
def test_a_configured_anthropic_provider_is_loaded_at_start(tmp_path: Path) -> None:
    report = started_with(tmp_path, WITH_ANTHROPIC, K_ANTHROPIC="a")
    assert report["started"] == {
        "anthropic": True,
        "app.llm.wire.anthropic": True,
        "app.llm.wire.openai": True,
    }
    assert report["adapter_complete"] is True
    assert report["built"] == ["anthropic/claude", "demo/scripted", "openai/gpt"]


@pytest.mark.slow
def test_a_provider_without_its_key_is_not_loaded(tmp_path: Path) -> None:
    report = started_with(tmp_path, WITH_ANTHROPIC)  # K_ANTHROPIC is not set
    assert report["started"] == {
        "anthropic": False,
        "app.llm.wire.anthropic": False,
        "app.llm.wire.openai": True,
    }
    assert report["built"] == ["demo/scripted", "openai/gpt"]
