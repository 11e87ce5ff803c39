"""The pydantic-ai capabilities a turn runs with, each typed on the turn's deps."""
