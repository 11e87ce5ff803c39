"""Database access: the async engine, sessions, and the models."""
