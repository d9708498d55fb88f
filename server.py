"""Run Talaria from a checkout without installing it: ``python server.py`` is ``talaria``.

The command itself lives in ``api.server.cli``; this file is not part of the installed package.
"""

import sys

from api.server.cli import main

if __name__ == "__main__":
    sys.exit(main())
