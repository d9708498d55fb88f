"""Shared fixtures live in the repository's test support, loaded here (it is not installed with Talaria).

Tests outside ``tests/`` (the founding acceptance test) load it with ``-p talaria_testing.plugin``.
"""

pytest_plugins = ["talaria_testing.plugin"]
