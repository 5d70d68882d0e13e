"""The kit's exceptions: each says what went wrong and what to change."""

__all__ = ["KitError"]


class KitError(Exception):
    """Base class of every error the kit raises on purpose."""
