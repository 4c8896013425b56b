"""Older import path of :mod:`isaac_adapter.app.overrides` (command-line overrides belong to the application)."""

from isaac_adapter.app.overrides import OverrideError, apply_override, apply_overrides, parse_override  # noqa: F401
