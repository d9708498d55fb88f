"""The pure rules: data in, data out; no files, no clock, no agent."""
