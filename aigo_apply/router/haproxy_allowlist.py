"""What the router forwards to an engine, as one allowlist: the OpenAI-compatible inference API of
vLLM v0.31.0, read from its FastAPI routes (scripts/vllm_routes.py prints them from the real package;
tests/contract/test_allowlist.py holds this module to them), each a POST naming its model in a JSON
body (audio: in a multipart form). The router answers GET /v1/models, /health and /metrics itself.
Every other path is a 404 whatever model it names: engines add control routes every release (vLLM's
development endpoints, SGLang's weight updates), and an allowlist need not know them.

SGLang and llama.cpp serve a subset of these paths under the same names; a path one of them does
not serve gets that engine's own 404. Pure data."""

from __future__ import annotations

# path -> what it is for (docs/router-and-security.md lists these)
JSON_PATHS: dict[str, str] = {
    "/v1/chat/completions": "generation: chat completions (OpenAI)",
    "/v1/chat/completions/batch": "generation: a batch of chat completions in one request (vLLM)",
    "/v1/completions": "generation: text completions (OpenAI)",
    "/v1/responses": "generation: the Responses API (OpenAI)",
    "/v1/messages": "generation: the Messages API (Anthropic)",
    "/v1/embeddings": "embeddings (OpenAI)",
    "/v2/embed": "embeddings (Cohere's v2 shape)",
    "/pooling": "pooling: the model's pooled outputs (vLLM)",
    "/classify": "pooling: classification (vLLM)",
    "/score": "scoring (vLLM)",
    "/v1/score": "scoring (vLLM)",
    "/generative_scoring": "scoring by a generative model (vLLM)",
    "/rerank": "reranking (Jina's shape)",
    "/v1/rerank": "reranking (Jina's shape)",
    "/v2/rerank": "reranking (Cohere's v2 shape)",
    "/tokenize": "tokenizing (vLLM)",
    "/detokenize": "tokenizing: back to text (vLLM)",
    "/v1/messages/count_tokens": "tokenizing: count a Messages request's tokens (Anthropic)",
}
# multipart/form-data uploads that name the model in a form field (the router reads it, models.lua)
FORM_PATHS: dict[str, str] = {
    "/v1/audio/transcriptions": "audio: speech to text (OpenAI)",
    "/v1/audio/translations": "audio: speech to English text (OpenAI)",
}
# what the router answers itself (never forwarded)
OWN_PATHS: dict[str, str] = {
    "/v1/models": "GET: the routed models whose engine is healthy now",
    "/health": "GET: the router's own health",
    "/metrics": "GET: Prometheus metrics (with api_keys, a key is needed unless router.metrics_without_key)",
    "/metrics/swaps": "GET: swap group counters (with on-demand models)",
}
# Inference paths of v0.31.0 that are not routed, and why (the contract test requires every route of
# the real package to be routed, answered by the router, or named here or among the engine's controls).
NOT_ROUTED: dict[str, str] = {
    "/v1/responses/{response_id}": "names no model (a stored response): cannot be routed by model",
    "/v1/responses/{response_id}/cancel": "names no model: cannot be routed by model",
    "/v1/chat/completions/render": "disaggregated serving internals (prompt rendering), not inference",
    "/v1/completions/render": "disaggregated serving internals, not inference",
    "/v1/responses/render": "disaggregated serving internals, not inference",
    "/v1/messages/render": "disaggregated serving internals, not inference",
    "/v1/chat/completions/derender": "disaggregated serving internals, not inference",
    "/v1/completions/derender": "disaggregated serving internals, not inference",
    "/inference/v1/generate": "token-in token-out generation for disaggregated serving, not the OpenAI API",
    "/invocations": "SageMaker's entry point: it dispatches to any task without naming one",
    "/ping": "SageMaker's health check: the router answers /health",
    "/load": "the engine's load figures: not for clients",
    "/version": "the engine's version: not for clients",
    "/kv_event_sources": "the engine's KV events: not for clients",
    "/fault_tolerance/status": "engine control",
    "/fault_tolerance/apply": "engine control",
}


def routed_paths() -> list[str]:
    """Every path forwarded to an engine, sorted."""
    return sorted({**JSON_PATHS, **FORM_PATHS})


def acl_lines(paths: list[str], per_line: int = 8) -> list[str]:
    """Paths as the words of `acl ... -m str` lines (HAProxy takes at most 64 words a line)."""
    return [" ".join(paths[i : i + per_line]) for i in range(0, len(paths), per_line)]
