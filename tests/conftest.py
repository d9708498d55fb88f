"""Shared fixtures live in the repository's test support, loaded here (it is not installed with Talaria).

Tests outside ``tests/`` (the founding acceptance test) load it with ``-p talaria_testing.plugin``.
"""

import sys

# Already loaded means already registered: by ``-p``, or by the pytest11 entry point of an editable
# install made before the wheel stopped declaring one. Registering the module again under another
# name would stop pytest, so it is named only when it is not there yet.
pytest_plugins = [] if "talaria_testing.plugin" in sys.modules else ["talaria_testing.plugin"]
