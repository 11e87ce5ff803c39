"""The `hearth` command: serve, migrate, and manage users.

`serve` upgrades the schema first (unless HEARTH_AUTO_MIGRATE=0) so that one command brings a
fresh checkout up; `users create` is the only way to make the first administrator, and the
other `users` commands do from a shell what the admin routes do over HTTP (app.users.commands).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from app.core.config_files import ConfigError
from app.core.db.engine import create_engine, session_factory
from app.core.db.migrate import upgrade
from app.files.data_dir import DataDirMismatch
from app.settings import Settings


async def _migrate(settings: Settings) -> None:
    engine = create_engine(settings.database_url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def _create_user(
    settings: Settings, email: str, password: str, admin: bool, display_name: str | None
) -> str:
    from app.auth.passwords import hash_password
    from app.clock import Clock
    from app.users.schemas import RegisterIn
    from app.users.service import EmailTaken, create_user

    try:
        body = RegisterIn(email=email, password=password, display_name=display_name)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise SystemExit(f"hearth users create: {problems}") from exc
    engine = create_engine(settings.database_url)
    try:
        async with session_factory(engine)() as db:
            try:
                user = await create_user(
                    db,
                    email=body.email,
                    password_hash=await hash_password(body.password),
                    display_name=body.display_name,
                    is_admin=admin,
                    now=Clock().now(),
                )
            except EmailTaken:
                raise SystemExit(f"hearth users create: {body.email} exists already") from None
            await db.commit()
            return str(user.id)
    finally:
        await engine.dispose()


async def _claim_data_dir(settings: Settings) -> None:
    from app.main import claim_data_dir

    engine = create_engine(settings.database_url)
    try:
        await claim_data_dir(engine, settings)
    finally:
        await engine.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="hearth", description="hearth chat backend")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="upgrade the schema and serve HTTP")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--workers",
        type=_worker_count,
        default=None,
        help="worker processes (default: one per core on PostgreSQL, one on SQLite)",
    )

    commands.add_parser("migrate", help="upgrade the database schema to head and exit")

    users = commands.add_parser("users", help="manage users")
    user_commands = users.add_subparsers(dest="users_command", required=True)
    create = user_commands.add_parser("create", help="create a user")
    create.add_argument("--email", required=True)
    create.add_argument("--password", required=True)
    create.add_argument("--display-name")
    create.add_argument("--admin", action="store_true")
    listing = user_commands.add_parser("list", help="list users, newest first")
    listing.add_argument("--search", help="part of an email or display name")
    for name, help_text in (
        ("disable", "refuse the user everywhere and stop their running turns"),
        ("enable", "let a disabled user in again"),
    ):
        user_commands.add_parser(name, help=help_text).add_argument("user", help="email or id")
    set_admin = user_commands.add_parser("set-admin", help="grant or take the admin flag")
    set_admin.add_argument("user", help="email or id")
    set_admin.add_argument("flag", choices=["on", "off"])
    remove = user_commands.add_parser(
        "delete", help="delete the user with their chats, uploads and files"
    )
    remove.add_argument("user", help="email or id")
    remove.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")

    args = parser.parse_args(argv)
    try:
        settings = Settings()
        if args.command == "migrate":
            asyncio.run(_migrate(settings))
            print("schema is at head")
        elif args.command == "users" and args.users_command == "create":
            user_id = asyncio.run(
                _create_user(settings, args.email, args.password, args.admin, args.display_name)
            )
            print(f"created user {user_id}")
        elif args.command == "users":
            _manage_users(settings, args)
        elif args.command == "serve":
            workers = args.workers or default_workers(settings.database_url)
            _serve(settings, args.host, args.port, workers)
    except (ConfigError, DataDirMismatch) as exc:
        sys.exit(f"hearth: configuration error: {exc}")
    except ValidationError as exc:
        problems = "; ".join(problem["msg"] for problem in exc.errors())
        sys.exit(f"hearth: configuration error: {problems}")


def _manage_users(settings: Settings, args: argparse.Namespace) -> None:
    from app.core.errors import HearthError
    from app.users import commands

    command = args.users_command
    try:
        if command == "list":
            _print_users(asyncio.run(commands.list_users(settings, args.search)))
        elif command == "delete":
            if not args.yes:
                raise SystemExit(
                    f"hearth users delete: this removes {args.user} and everything that was "
                    "theirs; run it again with --yes"
                )
            user_id = asyncio.run(commands.delete_user(settings, args.user))
            print(f"deleted user {user_id}")
        else:
            changes = {
                "disable": {"disabled": True},
                "enable": {"disabled": False},
                "set-admin": {"is_admin": getattr(args, "flag", "") == "on"},
            }[command]
            _print_users([asyncio.run(commands.update_user(settings, args.user, changes))])
    except HearthError as exc:
        raise SystemExit(f"hearth users {command}: {exc.detail}") from None


def _print_users(users: list[dict[str, Any]]) -> None:
    """One line a user: id, email, flags, created and last seen (UTC), display name."""
    for user in users:
        flags = ",".join(
            name for name, on in (("admin", user["is_admin"]), ("disabled", user["disabled"])) if on
        )
        seen = user["last_seen_at"]
        print(
            "\t".join(
                [
                    str(user["id"]),
                    user["email"],
                    flags or "-",
                    user["created_at"].strftime("%Y-%m-%d %H:%M"),
                    seen.strftime("%Y-%m-%d %H:%M") if seen else "never",
                    user["display_name"] or "",
                ]
            )
        )


def _worker_count(text: str) -> int:
    """`--workers`: a whole number from 1 to 64."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= count <= 64:
        raise argparse.ArgumentTypeError(f"{count} is not between 1 and 64")
    return count


def default_workers(database_url: str) -> int:
    """One worker per core this process may run on, on PostgreSQL; one on SQLite.

    SQLite takes one writer at a time for the whole file, and a turn writes as it streams, so a
    second worker only queues on the same lock; and on SQLite a running turn is followed only
    in the process that runs it (the live-event relay is PostgreSQL's), so a reload that reached
    another worker would not see the answer being written. PostgreSQL is the engine hearth
    scales out on: turns, stops and live events cross workers through it. An explicit
    `--workers` is honoured on either.
    """
    if make_url(database_url).get_backend_name() != "postgresql":
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # a platform without CPU affinity
        return max(1, os.cpu_count() or 1)


def _serve(settings: Settings, host: str, port: int, workers: int) -> None:
    import uvicorn

    from app.main import create_app
    from app.observability.logs import configure_logging
    from app.observability.metrics import serving_directory

    log_format = settings.log_format or ("text" if sys.stderr.isatty() else "json")
    configure_logging(log_format)
    os.environ["HEARTH_LOG_FORMAT"] = log_format  # for the workers, which log the same way
    if settings.auto_migrate:
        asyncio.run(_migrate(settings))
    asyncio.run(_claim_data_dir(settings))
    settings.signing_key  # noqa: B018  (create the secret once, before workers race for it)
    # uvicorn's proxy handling would believe X-Forwarded-For from loopback; the app decides
    # whose forwarding headers to believe (HEARTH_TRUSTED_PROXIES, app.auth.addresses).
    # Its own access log is off: hearth logs each request itself, with its id (app.observability).
    options: dict[str, Any] = {"host": host, "port": port, "proxy_headers": False}
    options |= {"access_log": False, "log_config": None}
    with serving_directory(enabled=settings.metrics_token is not None):
        if workers > 1:
            uvicorn.run("app.main:app", workers=workers, **options)
        else:
            uvicorn.run(create_app(settings), **options)


if __name__ == "__main__":
    main()
