"""The agent's side: turns, the worker processes, the agent's tools, memory, skills, cron and goals."""
