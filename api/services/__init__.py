"""The services: operations on sessions, the workspace, rendering, search, recovery."""
