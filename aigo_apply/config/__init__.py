"""aigo.yaml as checked data: YAML with line marks, the schema, cross-field rules, defaults, vLLM facts."""
