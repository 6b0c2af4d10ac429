"""Providers: one module per CLI. How to build its command, decode one output line, and resume."""
from __future__ import annotations
