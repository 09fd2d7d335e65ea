"""The only modules that import the outside world's client libraries (docker, huggingface_hub, pynvml)."""
