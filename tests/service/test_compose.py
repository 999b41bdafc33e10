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
        monkeypatch.setenv(key, re.sub(r"\$\{[^}]*\}", "some-admin-key", str(value)))
    settings = Settings()
    assert settings.redis_url == "redis://redis:6379/0" and settings.admin_key


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
