"""Helpers shared by the tests (not tests themselves, and no fixtures: those live in conftest.py
files). tests/ is on sys.path (pyproject's `pythonpath`), so a test imports them as
`from helpers.configs import write_config`; no test module imports another test module."""
