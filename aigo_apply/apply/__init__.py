"""Carrying out a plan: the executor and its steps, waits, journal, project lock, state folder, secrets."""
