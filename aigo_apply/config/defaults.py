"""The built-in values a file inherits when it leaves a setting out, in one place."""

from __future__ import annotations

DEFAULT_FILE = "aigo.yaml"
FILE_ENV = "AIGO_FILE"

DEFAULT_GPU_MEMORY_UTILIZATION = 0.90  # vLLM's own default is 0.92; we leave room for the desktop
DEFAULT_ROUTER_PORT = 8000
DEFAULT_ROUTER_BIND = "127.0.0.1"
ROUTER_IMAGE = "haproxy"  # the official image
ROUTER_DEFAULT_TAG = "3.2"  # an HAProxy LTS release
ROUTER_MAX_BODY_MB = 16
ROUTER_TIMEOUT = 600
ROUTER_STALL_SECONDS = 120  # an engine with running requests whose token count stands still this long is stalled
ROUTER_HOLD_SECONDS = 300  # a request held while its model's engine is replaced waits at most this long

# each engine's image, built-in tag and container port: its record (config/engine_kinds.py)
DEFAULT_TOOL_CALL_PARSER = "hermes"
DEFAULT_READY_TIMEOUT = 1800  # seconds; a large model with compilation takes many minutes
CANARY_PROMPT_TOKENS, CANARY_MAX_TOKENS = 256, 64  # a canary request's prompt and output, unless the file says
# every container's logs: Docker's json-file driver, rotated at this size, at most this many files (desired/logs.py)
LOG_MAX_SIZE, LOG_MAX_FILES = "50m", 5

AUTO_PORT_BASE, AUTO_PORT_SPAN = 20000, 10000  # below Linux's ephemeral range (32768+)
MAX_GGUF_PARTS = 256  # gguf-split writes a few dozen parts for the largest models (desired/model_store.py)
