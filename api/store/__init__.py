"""The store: settings, session files, the one way to change a session, the indexes, the agent's database read-only."""
