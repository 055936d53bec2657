"""The error every training step raises."""

from __future__ import annotations


class TrainConfigError(ValueError):
    """A recipe, override, data file or model path that cannot be launched; the message says which and why."""
