"""The container deployment: docker-compose.yml, the Dockerfile and .dockerignore, as data.

Nothing here needs a Docker engine or a database. A deployment file breaks silently when a
setting is renamed, a port moves or the repository layout changes, so the files are read as
data and checked against the code they configure: every `HEARTH_*` variable must be a field
of `Settings`, the database URL must point at the compose PostgreSQL service with its own
credentials, the data directory must be a named volume, and the image must keep the layout
`app/core/db/migrate.py` relies on. `Settings` is then built from exactly the environment the
container would get. Compose's `${VAR...}` interpolation is reproduced by a small resolver, so
the checks see the values compose would substitute. Where the docker compose plugin is
installed, `docker compose config` validates the file as well; elsewhere that test skips.
The tests are plain synchronous functions that use none of the suite's database fixtures.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PROVIDERS_FILE = ROOT / "config" / "providers.yaml"

PREFIX: str = Settings.model_config.get("env_prefix", "HEARTH_")
SECRET = f"{PREFIX}SECRET_KEY"
# What the image must carry beside the package, relative to the directory that holds `app/`.
LAYOUT = ("app", "alembic.ini", "migrations", "config")

SAMPLE_ENVIRONMENTS: dict[str, dict[str, str]] = {
    "only-the-secret": {SECRET: "sample-secret-key-0123456789"},
    "everything-set": {
        SECRET: "another-sample-secret-key",
        "POSTGRES_PASSWORD": "s3cret-Pass_word",
        "HEARTH_ALLOW_REGISTRATION": "false",
        "HEARTH_COOKIE_SECURE": "true",
        "HEARTH_ALLOWED_ORIGINS": "https://chat.example.com",
        "ANTHROPIC_API_KEY": "sk-ant-sample",
    },
}


# --- compose interpolation -------------------------------------------------------------------


class MissingVariable(LookupError):
    """A `${VAR:?message}` whose variable is unset: compose refuses the file."""


_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)"
    r"|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Substitute `$$`, `$VAR` and `${VAR}`, `${VAR:-default}`, `${VAR:?error}`, `${VAR:+alt}`."""

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        op, arg = match["op"], match["arg"] or ""
        current = env.get(name)
        if current == "" and (op or "").startswith(":"):
            current = None  # the colon forms treat an empty value like an unset one
        if op in (":-", "-"):
            return arg if current is None else current
        if op in (":?", "?"):
            if current is None:
                raise MissingVariable(f"{name}: {arg}")
            return current
        if op in (":+", "+"):
            return "" if current is None else arg
        return current or ""

    return _INTERPOLATION.sub(substitute, value)


def is_interpolation_of(value: str, name: str) -> bool:
    """True when `value` is nothing but one `${name...}` reference."""
    match = _INTERPOLATION.fullmatch(value)
    return match is not None and name in (match["braced"], match["bare"])


# --- reading the compose file ----------------------------------------------------------------


def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict), "docker-compose.yml is not a mapping"
    return data


def service(name: str) -> dict[str, Any]:
    services = load_compose().get("services") or {}
    assert name in services, f"docker-compose.yml has no service {name!r}"
    return services[name]


def environment(svc: Mapping[str, Any]) -> dict[str, str | None]:
    """A service's `environment`, in either the mapping or the `KEY=value` list form."""
    raw = svc.get("environment") or {}
    if isinstance(raw, list):
        pairs = (item.split("=", 1) if "=" in item else (item, None) for item in raw)
        return {key: value for key, value in pairs}
    return {key: None if value is None else _scalar(value) for key, value in raw.items()}


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resolved_environment(svc: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    return {
        key: interpolate(value, env) if value is not None else env.get(key, "")
        for key, value in environment(svc).items()
    }


def mounts(svc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume entry, short (`src:dst[:mode]`) or long syntax."""
    found: list[tuple[str, str]] = []
    for entry in svc.get("volumes") or []:
        if isinstance(entry, dict):
            found.append((str(entry.get("source", "")), str(entry["target"])))
        else:
            parts = str(entry).split(":")
            found.append((parts[0], parts[1]) if len(parts) > 1 else ("", parts[0]))
    return found


def named_volume_targets(svc: Mapping[str, Any]) -> set[str]:
    declared = load_compose().get("volumes") or {}
    return {target for source, target in mounts(svc) if source in declared}


def published_container_ports(svc: Mapping[str, Any]) -> set[int]:
    ports: set[int] = set()
    for entry in svc.get("ports") or []:
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).split("/", 1)[0].rsplit(":", 1)[-1]))
    return ports


def healthcheck_command(svc: Mapping[str, Any]) -> str:
    check = svc.get("healthcheck") or {}
    test = check.get("test")
    assert test and not check.get("disable"), "the service has no healthcheck"
    if isinstance(test, list):
        assert test[0] in ("CMD", "CMD-SHELL"), f"healthcheck test is {test!r}"
        return " ".join(test[1:])
    return str(test)


# --- reading the Dockerfile ------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def dockerfile_args(keyword: str) -> list[str]:
    return [arguments for name, arguments in dockerfile() if name == keyword]


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for arguments in dockerfile_args("ENV"):
        tokens = shlex.split(arguments)
        if "=" not in tokens[0]:
            env[tokens[0]] = " ".join(tokens[1:])
            continue
        for token in tokens:
            key, _, value = token.partition("=")
            env[key] = value
    return env


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), f"{arguments!r} is not the exec (JSON) form"
    return [str(item) for item in value]


def copy_targets() -> tuple[dict[str, str], str]:
    """Where each COPY source lands in the image, and the final WORKDIR."""
    workdir = "/"
    targets: dict[str, str] = {}
    for keyword, arguments in dockerfile():
        if keyword == "WORKDIR":
            workdir = posixpath.normpath(posixpath.join(workdir, arguments))
        elif keyword == "COPY":
            tokens = [token for token in shlex.split(arguments) if not token.startswith("--")]
            sources, destination = tokens[:-1], tokens[-1]
            base = posixpath.normpath(posixpath.join(workdir, destination))
            into_directory = destination.endswith("/") or len(sources) > 1
            for source in sources:
                name = posixpath.basename(source.rstrip("/"))
                targets[source] = posixpath.join(base, name) if into_directory else base
    return targets, workdir


def target_of(name: str, targets: Mapping[str, str]) -> str | None:
    for source, target in targets.items():
        if source.rstrip("/") == name:
            return target
        if fnmatch.fnmatchcase(name, source):  # a wildcard source such as `constraints.tx[t]`
            return posixpath.join(posixpath.dirname(target), name)
    return None


# --- the compose services --------------------------------------------------------------------


def test_both_services_exist() -> None:
    services = load_compose().get("services") or {}
    assert {"postgres", "hearth"} <= set(services)
    assert str(services["postgres"].get("image", "")).startswith("postgres:")


def test_hearth_is_built_from_the_repository_dockerfile() -> None:
    build = service("hearth").get("build")
    assert build is not None, "hearth must be built, not pulled"
    if isinstance(build, str):
        build = {"context": build}
    context = ROOT / build.get("context", ".")
    assert context.resolve() == ROOT
    assert (context / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE
    assert DOCKERFILE.is_file()


def test_hearth_publishes_the_port_the_image_exposes() -> None:
    exposed = {
        int(port.split("/")[0]) for args in dockerfile_args("EXPOSE") for port in args.split()
    }
    assert exposed == {8000}
    assert published_container_ports(service("hearth")) == exposed
    assert not service("postgres").get("ports"), "PostgreSQL stays inside the compose network"


def test_every_hearth_variable_is_a_setting() -> None:
    names = [*environment(service("hearth")), *dockerfile_env()]
    unknown = [
        name
        for name in names
        if name.startswith(PREFIX) and name[len(PREFIX) :].lower() not in Settings.model_fields
    ]
    assert not unknown, f"not fields of Settings: {unknown}"


def test_other_variables_are_provider_keys_passed_through() -> None:
    providers = yaml.safe_load(PROVIDERS_FILE.read_text()).get("providers") or []
    key_names = {p["api_key_env"] for p in providers if p.get("api_key_env")}
    for name, value in environment(service("hearth")).items():
        if name.startswith(PREFIX):
            continue
        assert name in key_names, f"{name} is neither a setting nor a provider's api_key_env"
        assert value is not None and is_interpolation_of(value, name), f"{name} is a literal"
        assert interpolate(value, {}) == "", f"an unset {name} must stay empty"
        assert interpolate(value, {name: "sk-sample"}) == "sk-sample"


@pytest.mark.parametrize("env", SAMPLE_ENVIRONMENTS.values(), ids=SAMPLE_ENVIRONMENTS.keys())
def test_database_url_points_at_the_postgres_service(env: dict[str, str]) -> None:
    url = make_url(resolved_environment(service("hearth"), env)[f"{PREFIX}DATABASE_URL"])
    postgres = resolved_environment(service("postgres"), env)
    assert url.drivername == "postgresql+asyncpg"
    assert url.host == "postgres" and url.host in load_compose()["services"]
    assert url.port in (None, 5432)
    assert url.username == postgres["POSTGRES_USER"]
    assert url.password == postgres["POSTGRES_PASSWORD"]
    assert url.database == postgres["POSTGRES_DB"]


def test_data_dir_is_a_named_volume() -> None:
    hearth = service("hearth")
    data_dir = environment(hearth)[f"{PREFIX}DATA_DIR"]
    assert data_dir is not None and posixpath.isabs(data_dir)
    assert data_dir in named_volume_targets(hearth)
    assert "/var/lib/postgresql/data" in named_volume_targets(service("postgres"))


def test_secret_key_is_required_from_the_environment() -> None:
    value = environment(service("hearth"))[SECRET]
    assert value is not None and is_interpolation_of(value, SECRET), f"{SECRET} is {value!r}"
    with pytest.raises(MissingVariable):
        interpolate(value, {})
    assert interpolate(value, {SECRET: "from-the-environment"}) == "from-the-environment"


def test_services_have_healthchecks_and_hearth_waits_for_postgres() -> None:
    assert "pg_isready" in healthcheck_command(service("postgres"))
    assert "/readyz" in healthcheck_command(service("hearth"))
    depends_on = service("hearth").get("depends_on")
    assert isinstance(depends_on, dict), "depends_on needs the long form to carry a condition"
    assert depends_on["postgres"]["condition"] == "service_healthy"


@pytest.mark.parametrize("env", SAMPLE_ENVIRONMENTS.values(), ids=SAMPLE_ENVIRONMENTS.keys())
def test_settings_build_from_the_container_environment(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(PREFIX):
            monkeypatch.delenv(name)
    # What the process sees: the image's ENV, overridden by the compose environment.
    container_env = {**dockerfile_env(), **resolved_environment(service("hearth"), env)}
    for name, value in container_env.items():
        monkeypatch.setenv(name, value)

    settings = Settings(_env_file=None)

    postgres = resolved_environment(service("postgres"), env)
    assert settings.database_url == (
        f"postgresql+asyncpg://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{postgres['POSTGRES_DB']}"
    )
    assert settings.data_dir == Path("/data")
    assert settings.secret_key is not None
    assert settings.secret_key.get_secret_value() == env[SECRET]


# --- the image -------------------------------------------------------------------------------


def test_dockerfile_serves_on_all_interfaces() -> None:
    (cmd,) = dockerfile_args("CMD")[-1:]
    argv = exec_form(cmd)
    assert argv[:2] == ["hearth", "serve"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    exposed = dockerfile_args("EXPOSE")[-1].split()[0].split("/")[0]
    assert argv[argv.index("--port") + 1] == exposed


def test_dockerfile_keeps_the_repository_layout() -> None:
    """`app/core/db/migrate.py` finds alembic.ini and migrations/ two levels above itself."""
    targets, workdir = copy_targets()
    for name in LAYOUT:
        assert target_of(name, targets) == posixpath.join(workdir, name), f"{name} misplaced"
    # The code that runs must be that copy: an editable install (or PYTHONPATH) points there.
    runs = " ".join(dockerfile_args("RUN"))
    assert re.search(r"pip install [^;&]*-e \.", runs) or workdir in dockerfile_env().get(
        "PYTHONPATH", ""
    )


def test_dockerfile_installs_with_the_constraints() -> None:
    targets, _ = copy_targets()
    copy_order = list(targets)
    pinned = [source for source in copy_order if fnmatch.fnmatchcase("constraints.txt", source)]
    assert pinned, "constraints.txt is not copied"
    # Dependencies come before the sources, so a source edit does not reinstall them.
    assert copy_order.index(pinned[0]) < copy_order.index("app")
    assert copy_order.index("pyproject.toml") < copy_order.index("app")
    installs = [run for run in dockerfile_args("RUN") if "pip install" in run]
    assert installs and all("-c constraints.txt" in run for run in installs)


def test_dockerfile_runs_unprivileged_with_a_data_volume_and_a_healthcheck() -> None:
    users = dockerfile_args("USER")
    assert users and users[-1].split(":")[0] not in ("root", "0")
    data_dir = dockerfile_env()[f"{PREFIX}DATA_DIR"]
    assert data_dir == environment(service("hearth"))[f"{PREFIX}DATA_DIR"]
    volumes = [
        path
        for args in dockerfile_args("VOLUME")
        for path in (json.loads(args) if args.startswith("[") else args.split())
    ]
    assert data_dir in volumes
    (healthcheck,) = dockerfile_args("HEALTHCHECK")
    command = exec_form(healthcheck.split(" CMD ", 1)[1])
    assert command[0] == "python" and "/healthz" in command[-1]


def test_dockerignore_keeps_secrets_out_and_the_sources_in() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith(("#", "!"))
    ]

    def ignored(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p.removeprefix("**/").rstrip("/")) for p in patterns)

    for name in (*LAYOUT, "pyproject.toml", "constraints.txt"):
        assert not ignored(name), f".dockerignore drops {name}, which the image needs"
    for name in (".env", ".venv", ".git", "var"):
        assert ignored(name), f".dockerignore lets {name} into the build context"


# --- docker compose itself, where it is installed --------------------------------------------


def _compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("the docker CLI is not installed; the compose file is checked by parsing only")
    try:
        result = subprocess.run(
            [docker, "compose", "version"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"`docker compose version` did not run: {exc}")
    if result.returncode != 0:
        pytest.skip(
            "the docker compose plugin is not installed (`docker compose version` failed); "
            "the compose file is checked by parsing only"
        )
    return [docker, "compose"]


def _run_compose_config(tmp_path: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    command = _compose_command()
    empty_env_file = tmp_path / "empty.env"  # a developer's .env must not leak into the check
    empty_env_file.write_text("")
    clean = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith((PREFIX, "POSTGRES_", "COMPOSE_")) and not name.endswith("_API_KEY")
    }
    return subprocess.run(
        [
            *command,
            "--env-file",
            str(empty_env_file),
            "--project-directory",
            str(ROOT),
            "-f",
            str(COMPOSE_FILE),
            "config",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**clean, **env},
    )


def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    result = _run_compose_config(tmp_path, {SECRET: "sample-secret-key"})
    assert result.returncode == 0, result.stderr


def test_docker_compose_refuses_to_start_without_the_secret(tmp_path: Path) -> None:
    result = _run_compose_config(tmp_path, {})
    assert result.returncode != 0
    assert SECRET in result.stderr
