"""Chats and turns: storage queries, API views, and (later) the turn runner and message builder."""
