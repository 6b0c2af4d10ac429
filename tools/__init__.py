"""Built-in tools, one small module per family."""
from __future__ import annotations
