"""Chats as users see them: user-scoped queries, API views and schemas, and the chat service."""
