"""Shared fixtures live in the ``talaria_testing.plugin`` pytest plugin (loaded by entry point)."""
