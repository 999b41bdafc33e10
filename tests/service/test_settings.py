from pathlib import Path

from service.records import AppConfig
from service.settings import Settings, get_settings
from tests.helpers.factories import make_config


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://example:6379/2")
    monkeypatch.setenv("GROVE_ADMIN_KEY", "secret")
    monkeypatch.setenv("GROVE_DATA_DIR", "/tmp/somewhere")
    monkeypatch.setenv("GROVE_TRAINER_LEASE", "2.5")
    s = Settings()
    assert (s.redis_url, s.admin_key, s.data_dir, s.trainer_lease) == (
        "redis://example:6379/2",
        "secret",
        Path("/tmp/somewhere"),
        2.5,
    )
    get_settings.cache_clear()
    assert get_settings() is get_settings()
    get_settings.cache_clear()


def test_rewards_are_rescaled_to_unit_range_for_the_learner():
    config = make_config(reward_range=(-1.0, 3.0))
    assert [config.rescale(r) for r in (-1.0, 1.0, 3.0, 7.0)] == [0.0, 0.5, 1.0, 1.0]
    assert AppConfig.from_json(config.to_json()) == config
