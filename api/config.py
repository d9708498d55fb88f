"""hermes-webui's ``api.config``, kept for the programs and tests that import it: a face over
``api.store.config``, which holds the code (``api/faces.py`` says how reading and patching pass through)."""

from api.faces import face

face(__name__, "api.store.config")
