"""docker-compose.yml and docker/Dockerfile, checked without a Docker engine: every command is
a real `grove` subcommand (the CLI's own parser), every environment variable is one the
settings read, and the deployment has what the issue asks (AOF, volume, replicas, healthchecks,
non-root, slim)."""

import re
from pathlib import Path

import pytest
import yaml
from pydantic import AliasChoices

from service.cli import parser
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()
GROVE_SERVICES = ("api", "trainer", "worker")


def settings_env_names() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        else:
            names.add(f"GROVE_{name.upper()}")
    return names


def interpolate(value: str, variables: dict[str, str] | None = None) -> str:
    """Compose's ${VAR:-default} / ${VAR:?error}: the variable if given, else the default
    (a required one, the admin key, gets a made-up value)."""

    def one(match: re.Match) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3)
        if variables and name in variables:
            return variables[name]
        return rest if op == ":-" else "some-admin-key"

    return re.sub(r"\$\{(\w+)(:[-?])?([^}]*)\}", one, value)


def parse_grove(command: list[str]):
    assert command[0] == "grove", command
    return parser().parse_args(command[1:])  # SystemExit (a failed test) if it is not valid


def test_services_and_redis_persistence():
    services = COMPOSE["services"]
    assert set(GROVE_SERVICES) | {"redis"} <= set(services)
    redis = services["redis"]
    assert "--appendonly" in redis["command"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    volume = redis["volumes"][0].split(":")[0]
    assert volume in COMPOSE["volumes"]  # a named volume, not a host folder
    for name, service in services.items():
        if service.get("restart") == "no":  # a one-shot job (cluster-create)
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


@pytest.mark.parametrize("name", GROVE_SERVICES)
def test_commands_are_real_grove_subcommands(name):
    service = COMPOSE["services"][name]
    args = parse_grove(service["command"])
    assert args.command == name
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD"
    health = parse_grove(test[1:])
    assert health.command == "healthcheck" and health.role == name
    assert service["depends_on"]["redis"]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", GROVE_SERVICES)
def test_every_env_var_is_read_by_the_settings(name, monkeypatch):
    environment = COMPOSE["services"][name]["environment"]
    unknown = set(environment) - settings_env_names()
    assert not unknown, f"{name} sets variables no setting reads: {sorted(unknown)}"
    for key, value in environment.items():  # and the values validate
        monkeypatch.setenv(key, interpolate(str(value)))
    settings = Settings()
    assert settings.redis_url == "redis://redis:6379/0" and settings.admin_key
    assert settings.job_redis_url == "redis://redis:6379/0"


def test_api_scales_out_without_port_clashes():
    api = COMPOSE["services"]["api"]
    assert api["deploy"]["replicas"] >= 2
    for mapping in api.get("ports", []):
        host = str(mapping).rsplit(":", 1)[0] if ":" in str(mapping) else ""
        assert host == "" or "-" in host, f"fixed host port {mapping!r} clashes between replicas"
    assert "container_name" not in api


def test_dockerfile_is_slim_non_root_with_a_healthcheck():
    bases = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert bases and all(b.endswith("-slim") for b in bases)
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    health = re.search(r"^HEALTHCHECK .*?CMD (\[.*?\])", DOCKERFILE, re.MULTILINE | re.DOTALL)
    assert health, "no HEALTHCHECK"
    assert parse_grove(yaml.safe_load(health.group(1))).role == "api"
    cmd = re.findall(r"^CMD (\[.*\])", DOCKERFILE, re.MULTILINE)[-1]
    assert parse_grove(yaml.safe_load(cmd)).command == "serve"


# -- profile cluster -------------------------------------------------------------------------
CLUSTER_NODES = ("redis-1", "redis-2", "redis-3")


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


@pytest.mark.parametrize("name", CLUSTER_NODES)
def test_cluster_masters_persist_and_announce_their_names(name):
    node = COMPOSE["services"][name]
    assert node["profiles"] == ["cluster"]
    command = node["command"]
    assert command[0] == "redis-server"
    assert option(command, "--cluster-enabled") == "yes"
    assert option(command, "--appendonly") == "yes"
    # one master down: the others serve their apps
    assert option(command, "--cluster-require-full-coverage") == "no"
    assert option(command, "--cluster-announce-hostname") == name
    assert option(command, "--cluster-preferred-endpoint-type") == "hostname"
    volume = node["volumes"][0].split(":")[0]
    assert volume in COMPOSE["volumes"]
    others = [COMPOSE["services"][n]["volumes"][0] for n in CLUSTER_NODES if n != name]
    assert node["volumes"][0] not in others  # each master its own append-only files


def test_cluster_create_is_a_one_shot_naming_every_master():
    from service.redis_cluster import parser as cluster_parser

    create = COMPOSE["services"]["cluster-create"]
    assert create["profiles"] == ["cluster"] and create["restart"] == "no"
    command = create["command"]
    assert command[:3] == ["python", "-m", "service.redis_cluster"]
    args = cluster_parser().parse_args(command[3:])
    assert args.command == "create"
    assert sorted(host for host, _ in args.nodes) == sorted(CLUSTER_NODES)
    assert all(port == 6379 for _, port in args.nodes)
    for name in CLUSTER_NODES:
        assert create["depends_on"][name]["condition"] == "service_healthy"


@pytest.mark.parametrize("name", GROVE_SERVICES)
def test_grove_services_run_on_the_cluster_with_the_profile(name, monkeypatch):
    service = COMPOSE["services"][name]
    assert "profiles" not in service  # the same services in both deployments
    create = service["depends_on"]["cluster-create"]
    assert create == {"condition": "service_completed_successfully", "required": False}
    for key, value in service["environment"].items():
        variables = {"GROVE_APPS_REDIS": "redis://redis-1:6379"}
        monkeypatch.setenv(key, interpolate(str(value), variables))
    settings = Settings()
    assert settings.redis_url == "redis://redis-1:6379"
    # batch jobs stay on the plain `redis` (rq cannot use a cluster)
    assert settings.job_redis_url == "redis://redis:6379/0"
    assert "cluster" not in COMPOSE["services"]["redis"].get("profiles", [])
