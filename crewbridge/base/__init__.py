"""Foundations (layer 1): values and mechanisms that know nothing of tools, CLIs or runs."""
