"""hermes-webui's ``api.models``, kept for the programs and tests that import it: a face over
``api.store.models``, which holds the code (``api/faces.py`` says how reading and patching pass through)."""

from api.faces import face

face(__name__, "api.store.models")
