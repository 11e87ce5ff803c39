"""All tables, imported together so `Base.metadata` is complete for Alembic and the app."""

from app.db.models.chats import ActivatedTool, Chat, ChatLlmTool, ChatSummary, Message
from app.db.models.installation import Installation
from app.db.models.knowledge import ChatEvidence, KnowledgeChunk
from app.db.models.llm import LlmRequest
from app.db.models.uploads import Upload
from app.db.models.users import AuthSession, LoginFailure, User

__all__ = [
    "ActivatedTool",
    "AuthSession",
    "Chat",
    "ChatEvidence",
    "ChatLlmTool",
    "ChatSummary",
    "Installation",
    "KnowledgeChunk",
    "LlmRequest",
    "LoginFailure",
    "Message",
    "Upload",
    "User",
]
