"""All tables, imported together so `Base.metadata` is complete for Alembic and the app."""

from app.models.chats import ActivatedTool, Chat, ChatLlmTool, ChatSummary, Message
from app.models.installation import Installation
from app.models.knowledge import ChatEvidence, KnowledgeChunk
from app.models.live import LiveEvent
from app.models.llm import LlmRequest, UsageDaily
from app.models.mcp import McpConnection
from app.models.uploads import Upload
from app.models.users import ApiKey, AuthSession, LoginFailure, User

__all__ = [
    "ActivatedTool",
    "ApiKey",
    "AuthSession",
    "Chat",
    "ChatEvidence",
    "ChatLlmTool",
    "ChatSummary",
    "Installation",
    "KnowledgeChunk",
    "LiveEvent",
    "LlmRequest",
    "LoginFailure",
    "McpConnection",
    "Message",
    "Upload",
    "UsageDaily",
    "User",
]
