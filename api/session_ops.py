"""hermes-webui's ``api.session_ops``, kept for the programs and tests that import it: a face over
``api.services.session_ops``, which holds the code (``api/faces.py`` says how reading and patching pass through)."""

from api.faces import face

face(__name__, "api.services.session_ops")
