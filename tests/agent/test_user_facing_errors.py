"""What a person is told when a model request fails: the provider's own sentence, never a
Python repr of its body or an exception's text."""

from __future__ import annotations

import pytest
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, UsageLimitExceeded

from app.agent.stream import provider_error, provider_message, user_facing_error


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "Overloaded",
        ),
        ({"error": {"message": "Rate limit reached", "code": "rate_limit"}}, "Rate limit reached"),
        ({"error": "model not found"}, "model not found"),
        ({"detail": "Not Found"}, "Not Found"),
        ("upstream\n  broke", "upstream broke"),
        ({"error": {"code": 500}}, None),
        (None, None),
        ("   ", None),
    ],
)
def test_the_provider_sentence_is_found_in_its_body(body: object, said: str | None) -> None:
    assert provider_message(body) == said


def test_a_long_body_is_cut() -> None:
    said = provider_message({"error": {"message": "x" * 2_000}})
    assert said is not None and len(said) == 500 and said.endswith("…")


def test_an_http_failure_names_the_status_and_the_sentence() -> None:
    error = ModelHTTPError(
        529, "claude", {"error": {"type": "overloaded", "message": "Overloaded"}}
    )
    told = provider_error(error)
    assert told == "The model provider answered 529: Overloaded"
    bare = provider_error(ModelHTTPError(500, "gpt", {"error": {"code": 1}}))
    assert bare == "The model provider answered 500."
    assert "{" not in told and "model_name" not in told


def test_other_failures_are_sentences() -> None:
    assert provider_error(ModelAPIError("gpt", "Request timed out.")) == (
        "The model request failed: Request timed out."
    )
    assert provider_error(RuntimeError("(sqlalchemy.exc.OperationalError) ...")) is None
    told = user_facing_error(RuntimeError("secret"), 25, "req-1")
    assert told == "hearth could not finish this turn because of an internal error (request req-1)."
    limit = user_facing_error(UsageLimitExceeded("too many"), 3)
    assert limit == "This turn reached its limit of 3 model rounds and was ended."
