"""hermes-webui's ``api.session_recovery``, kept for the programs and tests that import it: a face over
``api.services.session_recovery``, which holds the code (``api/faces.py`` says how reading and patching pass through)."""

from api.faces import face

face(__name__, "api.services.session_recovery")

if __name__ == "__main__":
    from api.services.session_recovery import main

    raise SystemExit(main())
