"""Test support for Talaria (a pytest plugin, a fake LLM server, server/process helpers)."""
