"""Session tokens and the CSRF token derived from them.

The cookie holds an opaque random token signed with itsdangerous: a forged or altered cookie
is refused before the database is asked. The database keeps only the token's SHA-256, so a
leaked table signs nobody in. The CSRF token is an HMAC of the session token under the same
secret: it needs no storage, changes with every session, and a value planted by another site
(cookie tossing) never matches.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from base64 import urlsafe_b64encode

from itsdangerous import BadSignature, Signer

SESSION_COOKIE = "hearth_session"
CSRF_COOKIE = "hearth_csrf"
CSRF_HEADER = "X-CSRF-Token"


class TokenCodec:
    """Signs, verifies, hashes and derives from session tokens under one secret key."""

    def __init__(self, secret_key: str) -> None:
        # Keys are derived once here (one per purpose) rather than by itsdangerous on every
        # verification: the session check runs on every request.
        session_key = hashlib.sha256(b"hearth.session\x00" + secret_key.encode()).digest()
        self._signer = Signer(session_key, key_derivation="none", digest_method=hashlib.sha256)
        self._csrf_key = hashlib.sha256(b"hearth.csrf\x00" + secret_key.encode()).digest()

    @staticmethod
    def new_token() -> str:
        return secrets.token_urlsafe(32)

    def sign(self, token: str) -> str:
        return self._signer.sign(token).decode()

    def unsign(self, cookie: str) -> str | None:
        """The token inside a cookie value, or None when the signature does not hold."""
        try:
            return self._signer.unsign(cookie).decode()
        except (BadSignature, UnicodeError):
            return None

    @staticmethod
    def hash(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def csrf_for(self, token: str) -> str:
        digest = hmac.new(self._csrf_key, token.encode(), hashlib.sha256).digest()
        return urlsafe_b64encode(digest).rstrip(b"=").decode()

    def csrf_ok(self, token: str, header: str | None, cookie: str | None) -> bool:
        """The double-submit check: header equals cookie, and both belong to this session."""
        if not header or not cookie:
            return False
        if not (header.isascii() and cookie.isascii()):
            return False  # a genuine token is ASCII; compare_digest refuses other str
        expected = self.csrf_for(token)
        return hmac.compare_digest(header, cookie) and hmac.compare_digest(header, expected)
