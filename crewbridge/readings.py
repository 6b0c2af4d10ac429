"""Option values checked as click's types check them, for the quick readings of crew's arguments
made before click loads (crewbridge.early, crewbridge.mcp.early): a value one of them takes, click
takes too."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Callable


def number(kind: Callable[[str], float], low: float, above: bool = False) -> Callable[[str], bool]:
    """Whether a value is what click.IntRange/FloatRange(min=low, min_open=above) of `kind` takes."""

    def valid(text: str) -> bool:
        try:
            value = kind(text)
        except ValueError:
            return False
        return not (value <= low if above else value < low)

    return valid
