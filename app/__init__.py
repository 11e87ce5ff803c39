"""hearth: a chat backend for LLM agents."""
