"""Child processes for crash tests: they write through the public names until they are killed."""

from __future__ import annotations

import os
from pathlib import Path


def grow_session_forever(session_dir: str, sid: str, ack_fd: int) -> None:
    """Append one message per save, forever; after each save returns, report the count on ``ack_fd``."""
    import api.models as models

    models.SESSION_DIR = Path(session_dir)
    models.SESSION_INDEX_FILE = Path(session_dir) / "_index.json"
    session = models.Session.load(sid) or models.Session(session_id=sid, title="crash", messages=[])
    n = len(session.messages)
    while True:
        session.messages.append(
            {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} " + "x" * (n % 97), "timestamp": 1000.0 + n}
        )
        n += 1
        session.save()
        os.write(ack_fd, f"{n}\n".encode())
