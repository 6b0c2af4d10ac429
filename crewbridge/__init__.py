"""crewbridge: give CLI language models tools they don't have, by prompt interception."""
from __future__ import annotations

__version__ = "0.1.0"
