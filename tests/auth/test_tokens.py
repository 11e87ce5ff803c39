"""Session tokens and CSRF tokens, without HTTP: what a forged, altered or foreign value gets."""

from __future__ import annotations

import pytest

from app.auth.tokens import TokenCodec

CODEC = TokenCodec("a-secret-key")


def test_a_signed_token_comes_back_and_an_altered_one_does_not() -> None:
    token = TokenCodec.new_token()
    cookie = CODEC.sign(token)
    assert CODEC.unsign(cookie) == token
    body, signature = cookie.rsplit(".", 1)
    # The first character: all six of its bits count (the last one's low bits are padding).
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    for forged in (f"{body}.{flipped}", f"x{cookie}", token, "", ".", "é.é"):
        assert CODEC.unsign(forged) is None, forged


def test_another_key_signs_nobody_in() -> None:
    token = TokenCodec.new_token()
    assert TokenCodec("another-key").unsign(CODEC.sign(token)) is None


def test_tokens_are_long_random_and_stored_only_as_a_hash() -> None:
    tokens = {TokenCodec.new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) >= 43 for t in tokens)
    token = tokens.pop()
    digest = TokenCodec.hash(token)
    assert len(digest) == 64 and token not in digest and digest == TokenCodec.hash(token)


def test_the_csrf_token_belongs_to_one_session_and_one_key() -> None:
    first, second = TokenCodec.new_token(), TokenCodec.new_token()
    assert CODEC.csrf_for(first) == CODEC.csrf_for(first)
    assert CODEC.csrf_for(first) != CODEC.csrf_for(second)
    assert CODEC.csrf_for(first) != TokenCodec("another-key").csrf_for(first)


@pytest.mark.parametrize(
    ("header", "cookie", "ok"),
    [
        ("mine", "mine", True),
        ("mine", "other", False),
        ("other", "other", False),  # a value planted by another site: not this session's
        (None, "mine", False),
        ("mine", None, False),
        ("", "", False),
        ("mïne", "mïne", False),  # not ASCII: refused, not an error
    ],
)
def test_the_double_submit_check(header: str | None, cookie: str | None, ok: bool) -> None:
    token = TokenCodec.new_token()
    mine = CODEC.csrf_for(token)

    def value(v: str | None) -> str | None:
        return mine if v == "mine" else v

    assert CODEC.csrf_ok(token, value(header), value(cookie)) is ok
