"""Authentication: password hashing, signed session tokens, CSRF, login throttling."""
