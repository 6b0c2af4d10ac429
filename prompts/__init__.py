"""The words the model sees, as package data (read with importlib.resources)."""
