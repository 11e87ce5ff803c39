"""The user's documents as knowledge: ingestion into passages, and full-text search over them."""
