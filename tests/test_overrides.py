"""Command-line overrides of nested dataclass configs (``ppo_bootstrap.overrides``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ppo_bootstrap import PPOConfig, RunnerConfig
from ppo_bootstrap.overrides import OverrideError, apply_override, apply_overrides, parse_override


@dataclass
class Inner:
    rate: float = 0.5
    count: int = 3
    sizes: tuple[int, ...] = (8, 4)
    flag: bool = False
    name: str = "a"
    window: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.rate < 0:
            raise ValueError(f"rate must be >= 0, got {self.rate}")


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    steps: int = 24


@pytest.mark.parametrize("text, key, value", [
    ("a.b=1.0e-3", "a.b", 1e-3),
    ("a.b=3", "a.b", 3),
    ("a=[1, 2]", "a", [1, 2]),
    ("a=true", "a", True),
    ("a=null", "a", None),
    ("a=", "a", None),
    ("a=gru", "a", "gru"),
    ("a.b = 2", "a.b", 2),
])
def test_parse_reads_yaml_values(text, key, value):
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["novalue", "=3", ""])
def test_parse_refuses_what_is_not_key_value(text):
    with pytest.raises(OverrideError, match="is not KEY=VALUE"):
        parse_override(text)


def test_values_take_the_type_of_the_field_and_the_rest_stays():
    cfg = Outer()
    out = apply_overrides({"x": cfg}, ["x.inner.rate=2", "x.inner.count=5.0", "x.inner.sizes=[16, 8, 4]",
                                       "x.inner.flag=true", "x.inner.name=7", "x.inner.window=[0.5, 1.5]",
                                       "x.steps=32"])["x"]
    assert out.inner == Inner(rate=2.0, count=5, sizes=(16, 8, 4), flag=True, name="7", window=(0.5, 1.5))
    assert isinstance(out.inner.rate, float) and isinstance(out.inner.count, int) and isinstance(out.inner.sizes, tuple)
    assert out.steps == 32
    assert cfg == Outer()  # the input is not changed


def test_yaml_exponent_without_a_dot_is_still_a_number():
    assert apply_override(Inner(), "rate", "3e-4").rate == pytest.approx(3e-4)  # YAML 1.1 reads 3e-4 as text


@pytest.mark.parametrize("override, message", [
    ("x.inner.rat=1", "override x.inner.rat: Inner has no field 'rat'; did you mean rate"),
    ("x.inner.zzz=1", "override x.inner.zzz: Inner has no field 'zzz'; fields: rate, count, sizes, flag, name, window"),
    ("x.inner.rate=fast", "override x.inner.rate: expected a number, got 'fast'"),
    ("x.inner.count=2.5", "override x.inner.count: expected a whole number, got 2.5"),
    ("x.inner.flag=1", "override x.inner.flag: expected true or false, got 1"),
    ("x.inner.sizes=4", "override x.inner.sizes: expected a list like [1, 2], got 4"),
    ("x.inner.sizes=None", "override x.inner.sizes: expected a list like [1, 2], got 'None' (None is spelt null here: x.inner.sizes=null)"),
    ("x.inner.rate=-1", "override x.inner.rate=-1: rate must be >= 0, got -1.0"),
    ("x.inner=3", "override x.inner: a group of fields; set one of them (x.inner.<field>=...)"),
    ("x.steps.y=3", "override x.steps.y: x.steps is a value, not a group of fields"),
    ("y.steps=3", "override y.steps: keys start with x."),
    ("x=3", "override x: keys start with x."),
])
def test_every_mistake_is_one_line_naming_the_key(override, message):
    with pytest.raises(OverrideError) as err:
        apply_overrides({"x": Outer()}, [override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_missing_config_is_named():
    with pytest.raises(OverrideError, match="this run has no env config to change"):
        apply_overrides({"env": None, "agent": RunnerConfig()}, ["env.sim_dt=0.004"])


def test_the_learner_config_validates_again():
    out = apply_overrides({"agent": RunnerConfig()}, ["agent.ppo.num_mini_batches=8", "agent.ppo.schedule=fixed"])["agent"]
    assert out.ppo == PPOConfig(num_mini_batches=8, schedule="fixed")
    with pytest.raises(OverrideError, match="schedule must be 'adaptive' or 'fixed'"):
        apply_overrides({"agent": RunnerConfig()}, ["agent.ppo.schedule=cosine"])


# -- a simulator's own env cfg, changed in place (Isaac Lab's configclass: nested dataclasses, dict params)

@dataclass
class Term:
    weight: float = 0.75
    params: dict = field(default_factory=lambda: {"threshold": 0.4, "sensor": "feet"})


@dataclass
class Rewards:
    feet_air_time: Term | None = field(default_factory=Term)
    feet_slide: Term | None = field(default_factory=lambda: Term(weight=-0.1))


@dataclass
class SimEnvCfg:
    rewards: Rewards = field(default_factory=Rewards)
    episode_length_s: float = 20.0


def test_a_simulators_env_cfg_is_changed_in_place_through_fields_and_dict_keys():
    from isaac_adapter.app.overrides import set_overrides

    cfg = SimEnvCfg()
    rewards, term = cfg.rewards, cfg.rewards.feet_air_time
    set_overrides("env", cfg, ["env.rewards.feet_air_time.weight=2", "env.rewards.feet_air_time.params.threshold=5e-1",
                               "env.rewards.feet_slide=null", "env.episode_length_s=10"])
    assert cfg.rewards is rewards and cfg.rewards.feet_air_time is term  # the same objects, changed
    assert (term.weight, type(term.weight)) == (2.0, float)
    assert term.params == {"threshold": 0.5, "sensor": "feet"}
    assert cfg.rewards.feet_slide is None and cfg.episode_length_s == 10.0


@pytest.mark.parametrize("override, message", [
    ("env.rewards.feet_air_tim.weight=1", "override env.rewards.feet_air_tim.weight: Rewards has no field "
                                          "'feet_air_tim'; did you mean feet_air_time?"),
    ("env.rewards.feet_air_time.params.treshold=1", "override env.rewards.feet_air_time.params.treshold: dict has no "
                                                     "field 'treshold'; did you mean threshold?"),
    ("env.rewards.feet_air_time.weight=much", "override env.rewards.feet_air_time.weight: expected a number, got 'much'"),
    ("env.rewards.feet_air_time=1.0", "override env.rewards.feet_air_time: a group of fields; set one of them"),
    ("env.episode_length_s.x=1", "override env.episode_length_s.x: env.episode_length_s is a value, not a group"),
    ("agent.ppo.gamma=0.9", "override agent.ppo.gamma: keys start with env."),
])
def test_every_in_place_mistake_is_one_line_naming_the_key(override, message):
    from isaac_adapter.app.overrides import set_overrides

    cfg = SimEnvCfg()
    with pytest.raises(OverrideError) as err:
        set_overrides("env", cfg, [override])
    assert message in str(err.value) and "\n" not in str(err.value)
    assert cfg == SimEnvCfg()  # nothing changed
