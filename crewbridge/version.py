"""crew's version, in a module of its own: the engine's modules read it without importing the
package, whose exports import them."""

from __future__ import annotations

__version__ = "0.1.0"
VERSION_MESSAGE = "crew, version %(version)s"  # what `crew --version` prints
