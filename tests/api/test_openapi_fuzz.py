"""Schema-driven fuzzing of the whole OpenAPI with a signed-in client (schemathesis).

Every documented operation gets three kinds of generated requests, on each backend:

* valid ones (schemathesis's positive generation): never a 5xx, and every answer matches the
  status codes, media types and schema the route publishes;
* invalid ones (negative generation): refused with a 4xx;
* hostile strings: a valid request with one string of it (a path or query parameter, a JSON or
  form field) replaced by what a well-behaved client never sends: lone surrogates (`"\\ud800"`,
  which JSON can carry as an escape and a URL as the bytes `%ED%A0%80`), NUL, control and
  bidirectional characters, strings far past any `maxLength`, and random text over the whole
  code point range. schemathesis's own alphabet leaves lone surrogates out (they cannot be
  encoded for the wire), so they are put in here, each location encoded as the wire allows.
  These must never get a 5xx and their answers must match the document too.

Headers and routes outside the document (the page, its files, metrics) get a short fixed list
of hostile values. Real turns are streamed and checked against the stream's event schema.

The server is a real uvicorn on loopback, on each backend, running in a thread of its own
because schemathesis calls it synchronously. Every exception the server logs is collected, so
a failure names the route, the input and the exception that caused each distinct 5xx.
Generation is derandomized: a run is reproducible, and it takes about a minute per backend.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import re
import secrets
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.main import create_app
from app.settings import Settings
from tests.support import ROOT, fresh_database, live_server, wait_until_sync

# Property-based and end to end over the whole API: part of the full run, not the quick one.
pytestmark = pytest.mark.slow

EXAMPLES = 40
HOSTILE_EXAMPLES = 12
"""Per operation and kind of string: each kind gets its own run, so one bug cannot hide another."""
# Logging out would end the session every later example relies on; their own tests cover them.
SKIPPED = {("POST", "/api/auth/logout"), ("POST", "/api/auth/logout-all")}
CSRF_COOKIE = "hearth_csrf"
HUGE = 1_100_000
"""Characters in a huge string: past every `maxLength`, under the 4 MiB JSON body limit."""
URL_LONGEST = 2_000
"""A URL part is cut to this: longer request lines are refused by the HTTP server itself."""

HOSTILE: dict[str, st.SearchStrategy[str]] = {
    "lone surrogates": st.sampled_from(["\ud800", "\udfff", "a\udc80b", "\ud83d!"]),
    "NUL and control characters": st.sampled_from(
        ["\x00", "a\x00b", "\x00" * 64, "\x7f\x1b[31m\x08", "\n\r\t", "%00"]
    ),
    "huge strings": st.builds(
        lambda unit, times: unit * times,
        st.sampled_from(["x", "é", "\x00", "\ud800", "\U0001d518"]),
        st.integers(min_value=HUGE // 2, max_value=HUGE),
    ),
    "other text": st.one_of(
        st.sampled_from(
            [
                "\u202e\u2066bidi\u2069",
                "\ufeffBOM",
                "\uffff\ufffe",
                "é\U0001d518 🌍 日本",
                "",
                "   ",
                "../../../etc/passwd",
                "null",
                "-1",
                "9" * 40,
            ]
        ),
        # Any code point, surrogates included.
        st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40),
    ),
}


class ThreadedServer:
    """hearth on a fresh database, served from a thread with an event loop of its own."""

    def __init__(self, backend: str, tmp_dir: Path) -> None:
        self.backend = backend
        self.tmp_dir = tmp_dir
        self.base_url = ""
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to the test thread
            self.error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with fresh_database(self.backend, self.tmp_dir) as url:
            engine = create_engine(url)
            await upgrade(engine)
            await engine.dispose()
            settings = Settings(
                _env_file=None,
                database_url=url,
                data_dir=self.tmp_dir / "data",
                secret_key=secrets.token_hex(16),
                providers_file=ROOT / "config" / "providers.yaml",
                login_max_failures=10_000,
                login_max_failures_per_address=10_000,
                registrations_per_hour=100_000,
            )
            async with live_server(create_app(settings)) as base_url:
                self.base_url = base_url
                self._ready.set()
                await self._stop.wait()

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        self._ready.wait(timeout=120)
        if self.error is not None:
            if isinstance(self.error, pytest.skip.Exception | pytest.fail.Exception):
                raise self.error
            raise RuntimeError("server did not start") from self.error
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=60)


SETTINGS = hypothesis.settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ServerErrors(logging.Handler):
    """Every exception the server logs, with where it was raised."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.seen: dict[str, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is None or record.exc_info[1] is None:
            return
        error = record.exc_info[1]
        frames = traceback.extract_tb(error.__traceback__)
        if not frames:
            return
        raised = frames[-1]
        ours = [f for f in frames if "/app/" in f.filename]
        cause = f"{type(error).__name__} raised in {_short(raised.filename)}:{raised.lineno}"
        if ours and ours[-1] is not raised:
            cause += f" (last frame of hearth: {_short(ours[-1].filename)}:{ours[-1].lineno})"
        route = UUID.sub("{id}", record.getMessage())
        self.seen.setdefault(f"{route}: {cause}", str(error)[:300])


def _short(filename: str) -> str:
    for marker in ("/app/", "/site-packages/"):
        if marker in filename:
            return ("app/" if marker == "/app/" else "") + filename.split(marker)[-1]
    return filename


@pytest.fixture(scope="module")
def fuzz_target(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ThreadedServer(backend, tmp_path_factory.mktemp(f"fuzz-{backend}")) as server:
        yield server.base_url


@pytest.fixture
def server_errors() -> Iterator[ServerErrors]:
    handler = ServerErrors()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


class SignedIn:
    """A signed-in session on the fuzzed server, and the document it serves."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.session = requests.Session()
        signed_up = self.session.post(
            f"{base_url}/api/auth/register",
            json={"email": f"fuzz-{secrets.token_hex(3)}@example.com", "password": "fuzz-pass"},
            timeout=30,
        )
        assert signed_up.status_code == 201, signed_up.text
        self.chats = [
            self.session.post(f"{base_url}/api/chats", json={}, headers=self.headers(), timeout=30)
            for _ in range(3)  # some real chats, so generated ids are not the only ones around
        ]
        uploaded = self.session.post(
            f"{base_url}/api/uploads",
            files=[("file", ("notes.md", b"# Notes\n\nSome text.\n", "text/markdown"))],
            headers=self.headers(),
            timeout=30,
        )
        assert uploaded.status_code == 201, uploaded.text
        self.real_ids = {
            "chat_id": [chat.json()["id"] for chat in self.chats],
            "upload_id": [uploaded.json()[0]["id"]],
        }
        self.schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")

    def headers(self) -> dict[str, str]:
        # Read each time: a generated sign-up or sign-in replaces the session and its token.
        return {"X-CSRF-Token": self.session.cookies.get(CSRF_COOKIE) or ""}

    def operations(self) -> list[schemathesis.APIOperation]:
        operations = [op.ok() for op in self.schema.get_all_operations()]
        return [op for op in operations if (op.method.upper(), op.path) not in SKIPPED]


@pytest.fixture
def signed_in(fuzz_target: str) -> SignedIn:
    return SignedIn(fuzz_target)


def report(failures: list[str], server_errors: ServerErrors) -> str:
    causes = [f"- {cause}: {message}" for cause, message in server_errors.seen.items()]
    return "\n\n".join(failures) + "\n\nServer exceptions:\n" + "\n".join(causes)


def test_openapi_fuzz_finds_no_500_and_no_schema_violation(
    signed_in: SignedIn, server_errors: ServerErrors
) -> None:
    operations = signed_in.operations()
    assert len(operations) >= 12
    failures: list[str] = []

    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            checks = [not_a_server_error, content_type_conformance]
            if mode is GenerationMode.POSITIVE:
                checks += [response_schema_conformance, status_code_conformance]
            else:
                checks += [negative_data_rejection]

            @hypothesis.settings(SETTINGS, max_examples=EXAMPLES)
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: schemathesis.Case) -> None:
                headers = {**signed_in.headers(), **(case.headers or {})}
                response = case.call(
                    base_url=signed_in.base_url, session=signed_in.session, headers=headers
                )
                case.validate_response(response, checks=checks)  # noqa: B023

            label = f"{operation.method.upper()} {operation.path} [{mode.value}]"
            try:
                run()
            except hypothesis.errors.Unsatisfiable:
                # An operation without parameters or body has no invalid input to generate.
                if mode is not GenerationMode.NEGATIVE:
                    failures.append(f"{label}: no input could be generated")
            except (Exception, BaseExceptionGroup) as exc:  # every operation's, then report all
                failures.append(f"{label}: {exc}"[:3000])

    assert not failures, report(failures, server_errors)


def _string_slots(case: schemathesis.Case) -> list[tuple[str, Any]]:
    """Where a hostile string can go: every parameter, and every scalar of the body."""
    slots: list[tuple[str, Any]] = [("path", name) for name in case.path_parameters or {}]
    slots += [("query", name) for name in case.query or {}]

    def walk(value: Any, at: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*at, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*at, index))
        elif at and (isinstance(value, str | int | float | bool) or value is None):
            slots.append(("body", at))

    body = case.body
    if (case.media_type or "").startswith("multipart/") and isinstance(body, dict):
        slots += [("body", (key,)) for key, item in body.items() if isinstance(item, str)]
    elif isinstance(body, dict | list):
        walk(body, ())
    # A query parameter the route does not know: every route takes the hostile string somewhere.
    slots.append(("query", "unexpected"))
    return slots


def _url_part(value: str) -> str:
    """A string as a URL carries it: UTF-8, lone surrogates as the bytes they would encode to."""
    return value[:URL_LONGEST].encode("utf-8", "surrogatepass").decode("latin-1")


def hostile_request(
    case: schemathesis.Case, slot: tuple[str, Any], value: str, signed_in: SignedIn
) -> dict[str, Any]:
    """The request of `case` with `value` in `slot`, as keyword arguments for `requests`.

    The hostile value is put in after schemathesis has serialized the case, since its own
    serializers encode strings strictly: a JSON body is sent as `json.dumps` writes it (lone
    surrogates as escapes), a URL part percent-encoded from its UTF-8 bytes."""
    where, name = slot
    token = f"hostile{secrets.token_hex(4)}"
    multipart = (case.media_type or "").startswith("multipart/")
    if where == "path":
        case.path_parameters = {**(case.path_parameters or {}), name: token}
    elif where == "query":
        case.query = {**(case.query or {}), name: token}
    elif multipart:
        case.body[name[0]] = value.encode("utf-8", "surrogatepass")
    # A fresh connection each: a server may close one whose request it refused unread.
    headers = {**signed_in.headers(), **(case.headers or {}), "Connection": "close"}
    kwargs = case.as_transport_kwargs(base_url=signed_in.base_url, headers=headers)
    if where == "path":
        encoded = quote(_url_part(value), safe="", encoding="latin-1")
        kwargs["url"] = kwargs["url"].replace(token, encoded)
    elif where == "query":
        params = {
            k: _url_part(value if v == token else str(v)) for k, v in kwargs["params"].items()
        }
        kwargs["params"] = urlencode(params, encoding="latin-1")
    elif not multipart:
        body = copy.deepcopy(case.body)
        target = body
        for key in name[:-1]:
            target = target[key]
        target[name[-1]] = value
        kwargs.pop("json", None)
        kwargs["data"] = json.dumps(body).encode()
    return kwargs


def test_hostile_strings_anywhere_get_a_4xx_not_a_500(
    signed_in: SignedIn, server_errors: ServerErrors
) -> None:
    checks = [not_a_server_error, content_type_conformance, response_schema_conformance]
    failures: list[str] = []
    for operation in signed_in.operations():
        for kind, strings in HOSTILE.items():

            @hypothesis.settings(SETTINGS, max_examples=HOSTILE_EXAMPLES)
            @given(
                case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                value=strings,
                data=st.data(),
            )
            def run(case: schemathesis.Case, value: str, data: st.DataObject) -> None:
                slot = data.draw(st.sampled_from(_string_slots(case)), label="slot")
                # Half the time the other ids name real objects, so the string gets past the
                # lookup that a random id fails (never for a DELETE, which would use them up).
                if case.method.upper() != "DELETE" and data.draw(st.booleans(), label="real"):
                    for name, ids in signed_in.real_ids.items():
                        if name in (case.path_parameters or {}) and slot != ("path", name):
                            case.path_parameters[name] = data.draw(st.sampled_from(ids))
                kwargs = hostile_request(case, slot, value, signed_in)
                # An empty path segment may name another route, which redirects: not followed.
                response = signed_in.session.request(**kwargs, timeout=120, allow_redirects=False)
                try:
                    case.validate_response(response, checks=checks)
                except (Exception, BaseExceptionGroup) as exc:
                    shown = value if len(value) < 80 else f"{value[:8]!r}... ({len(value)} chars)"
                    exc.add_note(f"hostile string {shown!r} in {slot}")
                    raise

            label = f"{operation.method.upper()} {operation.path} [{kind}]"
            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # schemathesis's FailureGroup is one
                notes = "\n".join(getattr(exc, "__notes__", []))
                failures.append(f"{label}: {exc}"[:1500] + "\n" + notes[-300:])

    assert not failures, report(failures, server_errors)


# Headers a browser or a script may send in any bytes: each route family gets each of them.
HOSTILE_HEADERS: list[tuple[str, bytes]] = [
    ("X-CSRF-Token", "é".encode()),
    ("X-CSRF-Token", b"\xff\xfe"),
    ("X-CSRF-Token", b"x" * 8000),
    ("Cookie", "hearth_session=é; hearth_csrf=\u00ff".encode()),
    ("Cookie", b"hearth_session=\xff\xfe"),
    ("Authorization", "Bearer é".encode()),
    ("Authorization", b"Bearer \xff"),
    ("Authorization", b"Basic Zm9vOmJhcg=="),
    ("Range", "bytes=é-".encode()),
    ("Range", b"bytes=99999999999999999999999-"),
    ("If-None-Match", b"\xff"),
    ("X-Forwarded-For", "é, \u00ff".encode()),
    ("Origin", b"http://\xff"),
    ("Content-Type", b"application/json; charset=\xff"),
]
# Routes outside the document too: the page, its files, metrics.
HEADER_TARGETS = [
    ("GET", "/api/auth/me"),
    ("POST", "/api/chats"),
    ("GET", "/api/chats"),
    ("POST", "/api/uploads"),
    ("GET", "/data/files/notes.txt"),
    ("GET", "/"),
    ("GET", "/web/js/main.js"),
    ("GET", "/metrics"),
]
RAW_PATHS = [
    "/%ED%A0%80",
    "/web/%ED%A0%80",
    "/web/%00",
    "/web/..%2F..%2Fpyproject.toml",
    "/data/files/%ED%A0%80",
    "/data/files/a%00b",
    "/data/files/%C0%AE%C0%AE/%C0%AE%C0%AE/etc/passwd",
    "/data/%ED%A0%80/x",
    "/api/chats/%ED%A0%80",
    "/api/chats?cursor=%ED%A0%80",
    "/api/chats?limit=%00",
    "/api/uploads?cursor=%FF",
]


# Upload file names as raw bytes in the part header: what a browser never sends, a script may.
HOSTILE_FILENAMES = [
    b"a\x00b.txt",
    b"\xed\xa0\x80.txt",
    b"\xff\xfe.txt",
    b"",
    b".",
    b"..",
    b"../../etc/passwd",
    b"/abs/path.txt",
    b"C:\\temp\\x.txt",
    "é\u202e\ufeff🌍.txt".encode(),
    b"x" * 10_000 + b".txt",
    b'a\\"b.txt',
    b"%00%2e%2e.txt",
]


def _multipart(filename: bytes, extra: bytes = b"") -> tuple[bytes, str]:
    boundary = secrets.token_hex(8)
    body = (
        f"--{boundary}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: text/plain\r\n\r\nsome text\r\n'
        + extra.replace(b"BOUNDARY", boundary.encode())
        + f"--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def test_hostile_headers_and_raw_paths_get_a_4xx_not_a_500(
    signed_in: SignedIn, server_errors: ServerErrors
) -> None:
    failures: list[str] = []
    for method, path in HEADER_TARGETS:
        for name, value in HOSTILE_HEADERS:
            headers: dict[str, str | bytes] = {**signed_in.headers(), "Connection": "close"}
            headers[name] = value
            response = signed_in.session.request(
                method, signed_in.base_url + path, headers=headers, json={}, timeout=60
            )
            if response.status_code >= 500:
                failures.append(
                    f"{method} {path} with {name}: {value[:40]!r}: {response.status_code}"
                )
    for path in RAW_PATHS:
        response = signed_in.session.get(signed_in.base_url + path, timeout=60)
        if response.status_code >= 500:
            failures.append(f"GET {path}: {response.status_code}")
    chat_field = (
        b'--BOUNDARY\r\nContent-Disposition: form-data; name="chat_id"\r\n\r\n\xed\xa0\x80\r\n'
    )
    for filename in HOSTILE_FILENAMES:
        for extra in (b"", chat_field):
            body, content_type = _multipart(filename, extra)
            headers = {**signed_in.headers(), "Content-Type": content_type, "Connection": "close"}
            response = signed_in.session.post(
                f"{signed_in.base_url}/api/uploads", data=body, headers=headers, timeout=60
            )
            if response.status_code >= 500:
                failures.append(f"POST /api/uploads, filename {filename[:40]!r}: {response.text}")
            elif response.status_code == 201:
                for upload in response.json():  # what was kept can be read back
                    served = signed_in.session.get(signed_in.base_url + upload["url"], timeout=60)
                    if served.status_code != 200:
                        failures.append(f"GET {upload['url']}: {served.status_code}")
    assert not failures, report(failures, server_errors)


def test_real_turns_stream_events_that_match_the_document(
    signed_in: SignedIn, server_errors: ServerErrors
) -> None:
    """The demo model's turns, sent through schemathesis and checked by its conformance checks;
    hostile contents reach a real chat too (the generated ids above rarely name one)."""
    operation = signed_in.schema["/api/chats/{chat_id}/messages"]["POST"]
    checks = [not_a_server_error, content_type_conformance, response_schema_conformance]
    chat_id = signed_in.chats[0].json()["id"]
    failures: list[str] = []
    contents = [
        "What is in my workspace?",
        "é\U0001d518 🌍\u202e",
        "a\x00b",
        "\ud800",
        "x" * 200_001,
    ]

    def ended() -> bool:  # the next message waits until this turn has ended
        chat = signed_in.session.get(f"{signed_in.base_url}/api/chats/{chat_id}").json()
        return not chat["running"]

    for content in contents:
        case = operation.Case(path_parameters={"chat_id": chat_id}, body={"content": content})
        headers = {**signed_in.headers(), "Connection": "close"}
        kwargs = case.as_transport_kwargs(base_url=signed_in.base_url, headers=headers)
        kwargs.pop("json", None)
        kwargs["data"] = json.dumps({"content": content}).encode()
        response = signed_in.session.request(**kwargs, timeout=120)
        try:
            case.validate_response(response, checks=checks)
        except (Exception, BaseExceptionGroup) as exc:
            failures.append(f"content {content[:20]!r}: {exc}"[:2000])
        if response.status_code == 200:
            assert response.text.endswith("data: [DONE]\n\n"), response.text[-300:]
            types = [
                json.loads(line[6:])["type"]
                for line in response.text.splitlines()
                if line.startswith("data: {")
            ]
            assert {"start", "data-user-message", "text-delta", "finish"} <= set(types), types
            assert "tool-output-available" in types, types
        elif response.status_code != 422:
            failures.append(f"content {content[:20]!r}: {response.status_code} {response.text}")
        wait_until_sync(ended, failure=f"the turn on {content[:20]!r} did not end")
    assert not failures, report(failures, server_errors)
