"""aigo-apply: LLM serving engines on a workstation, declared in aigo.yaml, planned and applied."""

__version__ = "0.1.0"
