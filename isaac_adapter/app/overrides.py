"""Command-line overrides of nested dataclass configs, as Isaac Lab's Hydra overrides read:
``agent.ppo.learning_rate=3e-4``, ``env.rewards.action_rate=-0.05``, ``agent.policy.actor_hidden=[256,128]``.

A value is read as YAML (numbers, booleans, ``null``, lists), then converted to the type of the
field it replaces (a list for a tuple field becomes a tuple, an int for a float field a float), and
the dataclass is rebuilt with :func:`dataclasses.replace`, so its own validation runs again. Every
mistake is one :class:`OverrideError` line naming the key: an unknown field (with the fields it
could have meant), a value of the wrong type, or one the config refuses.

A simulator's own env cfg (Isaac Lab's ``configclass``: nested dataclasses, with dicts such as a
reward term's ``params``) is changed in place instead, as Isaac Lab's ``train.py`` applies Hydra
overrides to it: ``env.rewards.feet_air_time.weight=1.5``, ``env.rewards.feet_air_time.params.threshold=0.5``,
``env.rewards.feet_slide=null`` (a term set to null is off).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import yaml


class OverrideError(ValueError):
    """An override that cannot be applied; the message names the key and what to do."""


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=1e-3"`` -> ``("a.b", 0.001)``; the value is read as YAML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(f"override {text!r} is not KEY=VALUE (e.g. agent.ppo.learning_rate=3e-4)")
    try:
        return key, yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as err:
        raise OverrideError(f"override {key}: cannot read {raw!r} ({str(err).splitlines()[0]})") from None


def _convert(value: Any, current: Any, key: str) -> Any:
    """``value`` in the type of ``current`` (the field's present value), where that type is known."""
    if value is None:
        return value
    if current is None:  # an optional field that is off: pairs and sizes are tuples in these configs
        return tuple(value) if isinstance(value, list) else value
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise OverrideError(f"override {key}: expected true or false, got {value!r}")
        return value
    if isinstance(current, (int, float)) and not isinstance(current, bool):
        if isinstance(value, str):  # YAML reads 3e-4 (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OverrideError(f"override {key}: expected a number, got {value!r}")
        if isinstance(current, int) and isinstance(value, float) and not value.is_integer():
            raise OverrideError(f"override {key}: expected a whole number, got {value!r}")
        return type(current)(value)
    if isinstance(current, (tuple, list)):
        if not isinstance(value, (list, tuple)):
            hint = f" (None is spelt null here: {key}=null)" if value in ("None", "none") else ""  # YAML's spelling
            raise OverrideError(f"override {key}: expected a list like [1, 2], got {value!r}{hint}")
        return type(current)(value)
    if isinstance(current, str) and not isinstance(value, str):
        return str(value)
    return value


def _no_field(config: Any, head: str, names: list[str], full: str) -> OverrideError:
    close = difflib.get_close_matches(head, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; fields: {', '.join(names)}"
    return OverrideError(f"override {full}: {type(config).__name__} has no field {head!r}{hint}")


def apply_override(config: Any, key: str, value: Any, prefix: str = "") -> Any:
    """A copy of dataclass ``config`` with the field at dotted ``key`` set to ``value``.

    ``prefix`` is prepended to ``key`` in error messages (the name of ``config`` on the command line).
    """
    return _apply_together(config, [(key, value)], prefix)


def apply_overrides(configs: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``overrides`` (``"root.path=value"``) to the dataclasses ``configs`` (root name -> config).

    The overrides of one group are set together: each group is rebuilt once, with all of its new
    fields, so that fields its validation pairs can be given on one command line
    (``env.randomization.push_interval_s=[2,4] env.randomization.push_velocity=[-0.5,0.5]``); a key
    given twice takes its last value. Returns a new dict; ``configs`` is left as it was.
    """
    out = dict(configs)
    per_root: dict[str, list[tuple[str, Any]]] = {}
    for text in overrides:
        key, value = parse_override(text)
        root, _, path = key.partition(".")
        if root not in out or not path:
            raise OverrideError(f"override {key}: keys start with {' or '.join(f'{r}.' for r in configs)}")
        if out[root] is None:
            raise OverrideError(f"override {key}: this run has no {root} config to change")
        per_root.setdefault(root, []).append((path, value))
    for root, items in per_root.items():
        out[root] = _apply_together(out[root], items, prefix=f"{root}.")
    return out


def _apply_together(config: Any, items: list[tuple[str, Any]], prefix: str) -> Any:
    """A copy of dataclass ``config`` with every dotted key of ``items`` set to its value, each group
    rebuilt (and so validated) once; a refused result names every override of the group."""
    names = [f.name for f in dataclasses.fields(config)]
    per_field: dict[str, list[tuple[str, Any]]] = {}
    for key, value in items:
        head, _, rest = key.partition(".")
        if head not in names:
            raise _no_field(config, head, names, f"{prefix}{key}")
        per_field.setdefault(head, []).append((rest, value))
    changes = {}
    for head, sets in per_field.items():
        current, full = getattr(config, head), f"{prefix}{head}"
        if dataclasses.is_dataclass(current):
            if any(not rest for rest, _ in sets):
                raise OverrideError(f"override {full}: a group of fields; set one of them ({full}.<field>=...)")
            changes[head] = _apply_together(current, sets, prefix=f"{full}.")
            continue
        if any(rest for rest, _ in sets):
            raise OverrideError(f"override {full}.{next(rest for rest, _ in sets if rest)}: {full} is a value, "
                                "not a group of fields")
        changes[head] = [_convert(value, current, full) for _, value in sets][-1]
    try:
        return dataclasses.replace(config, **changes)
    except (ValueError, TypeError) as err:
        given = " ".join(f"{prefix}{key}={value!r}" for key, value in items)
        raise OverrideError(f"override {given}: {err}") from None


def _is_group(value: Any) -> bool:
    return isinstance(value, dict) or (dataclasses.is_dataclass(value) and not isinstance(value, type))


def set_override(config: Any, key: str, value: Any, prefix: str = "") -> None:
    """Set the field (or dict key) at dotted ``key`` of ``config`` to ``value`` in place, converted to
    the type of the value it replaces; ``None`` may replace a whole group (Isaac Lab: a term off)."""
    head, _, rest = key.partition(".")
    full = f"{prefix}{key}"
    names = [str(k) for k in config] if isinstance(config, dict) else [f.name for f in dataclasses.fields(config)]
    if head not in names:
        raise _no_field(config, head, names, full)
    current = config[head] if isinstance(config, dict) else getattr(config, head)
    if rest:
        if not _is_group(current):
            raise OverrideError(f"override {full}: {prefix}{head} is a value, not a group of fields")
        set_override(current, rest, value, prefix=f"{prefix}{head}.")
        return
    if _is_group(current) and value is not None:
        raise OverrideError(f"override {full}: a group of fields; set one of them ({full}.<field>=...) or null to drop it")
    new = value if _is_group(current) else _convert(value, current, full)
    if isinstance(config, dict):
        config[head] = new
    else:
        setattr(config, head, new)


def set_overrides(root: str, config: Any, overrides: list[str]) -> None:
    """Apply ``overrides`` (``"<root>.path=value"``, each of them) to ``config`` in place."""
    for text in overrides:
        key, value = parse_override(text)
        head, _, path = key.partition(".")
        if head != root or not path:
            raise OverrideError(f"override {key}: keys start with {root}.")
        set_override(config, path, value, prefix=f"{root}.")
