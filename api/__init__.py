"""Talaria: a durable web UI for the Hermes agent."""
