"""Pointing hearth at the fake provider servers: model ids per kind and a providers file."""

from __future__ import annotations

from tests.fakes.providers import FakeProviderServer

KINDS = ["anthropic", "openai", "moonshot"]
MODEL_IDS = {"anthropic": "anth/claude-test", "openai": "oai/gpt-test", "moonshot": "kimi/kimi-k2"}
DTL_MODEL_IDS = {
    "anthropic_tool_reference": "anth/claude-dtl",
    "kimi_system_tools": "kimi/k3-test",
    "none": "oai/gpt-test",
}
"""A model per DTL mode: each of the first two has `tool_search` (the second by an enrich rule)."""
MEDIA_MODEL_IDS = {"anthropic": "anth/claude-test", "openai": "oai/gpt-vision"}
"""Models that view images and PDFs."""
VISION_MODEL_IDS = {**MEDIA_MODEL_IDS, "moonshot": "kimi/kimi-vision"}
"""A model per kind that views images."""
CALL_IDS = {
    "anthropic": "toolu_01Abc",
    "openai": "call_abc123",
    "moonshot": "functions.list_files:0",
}


def providers_yaml(fakes: dict[str, FakeProviderServer]) -> str:
    return f"""
providers:
  - {{id: demo, kind: demo, models: [{{id: scripted}}]}}
  - id: anth
    kind: anthropic
    base_url: {fakes["anthropic"].base_url}
    api_key_env: HEARTH_TEST_PROVIDER_KEY
    models:
      - id: claude-test
        capabilities: [vision, document]
        max_output_tokens: 1024
        pricing: {{input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}
      - {{id: claude-dtl, capabilities: [vision, document, tool_search], max_output_tokens: 1024}}
  - id: oai
    kind: openai
    base_url: {fakes["openai"].base_url}
    api_key_env: HEARTH_TEST_PROVIDER_KEY
    models:
      - {{id: gpt-test, max_output_tokens: 1024, pricing: {{input: 2, output: 8, cache_read: 0.5}}}}
      - {{id: gpt-vision, capabilities: [vision, document], max_output_tokens: 1024}}
  - id: kimi
    kind: moonshot
    base_url: {fakes["moonshot"].base_url}
    api_key_env: HEARTH_TEST_PROVIDER_KEY
    models:
      - {{id: kimi-k2, max_output_tokens: 1024}}
      - {{id: k3-test, max_output_tokens: 1024}}
      - {{id: kimi-vision, capabilities: [vision], max_output_tokens: 1024}}
    enrich: [{{match: "k3*", add_capabilities: [video, tool_search]}}]
"""
