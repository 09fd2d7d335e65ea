#!/usr/bin/env python3
"""aigo-apply's STUB ENGINE: a stand-in for `vllm serve` in tests and the demo. It serves no model.

It takes the command line aigo-apply generates the way vLLM v0.31.0 reads it (positional model, then
flags; names checked against the same v0.31.0 lists, with vLLM's startup error texts), and answers
like vLLM's OpenAI server: nothing on the port while "loading", then /health, /v1/models,
/v1/chat/completions (JSON and SSE) with vLLM's 400/404 error bodies. Standard library only.

With --uds PATH it serves on a Unix socket instead, as vLLM does: bound at start (an existing file
there is an error, "Address already in use", as in vLLM), listening only once "loaded", no chmod (its
mode follows the umask). The image's `vllm serve ...` runs it, like vLLM's own command.

Two more dialects stand in for the other engines, reached the way their images are started:
  `python3 -m sglang.launch_server --model-path ...`  SGLang's flags (a shim package in the image);
  `/app/llama-server --model FILE.gguf ...`           llama.cpp's flags; the port answers 503
                                                      "Loading model" while loading, as llama-server does,
                                                      and the .gguf file must exist.

Behaviour for tests, through the container environment:
  AIGO_STUB_LOAD_SECONDS   seconds of "loading" before the port opens (default 0.5)
  AIGO_STUB_FAIL_START     exit with status 1 right after loading, as an engine that cannot start
                           ("vllm": after vLLM's shape of failure, the cause 40 lines before the end)
  AIGO_STUB_NEVER_READY    keep "loading" forever
  AIGO_STUB_CRASH_AFTER    exit with status 1 this many seconds after becoming ready
  AIGO_STUB_STREAM_DELAY   seconds between the events of a streamed reply (default 0)
  AIGO_STUB_REPLY_SECONDS  seconds each chat completion holds its request before answering, without
                           using the CPU, as a real engine's GPU time does (default 0: answer at once)
  AIGO_STUB_HOLD_MAX_TOKENS N:S  a request asking max_tokens N is held S seconds before any token (a stall)
  AIGO_STUB_HEALTH_SECONDS seconds /health takes to answer once ready, as a busy engine's may (default 0)
  AIGO_STUB_METRICS_SECONDS seconds /metrics takes to answer (default 0)
  AIGO_STUB_MAX_MODEL_LEN_CAP  /v1/models reports at most this max_model_len (an engine that capped it)
  AIGO_STUB_PRINT_ENV      names of variables whose values the stub prints at start (a careless engine)
  AIGO_STUB_METRICS_EXTRA  a JSON list of lines appended to /metrics as they are (a hostile engine's),
                           each a string (a lone surrogate such as "\udcff" is that byte, not UTF-8) or
                           {"line": TEXT, "fill": N, "end": END}: TEXT's "{fill}" as N x's, END (default
                           a line feed) after it
  AIGO_STUB_TOKEN_SECONDS  seconds each token of a /v1/completions reply takes (default 0)
  AIGO_STUB_OUTPUT_VARIANT a word mixed into what /v1/completions answers (another variant, other words)
  AIGO_STUB_CHATTY_LINES   once ready, print this many numbered lines a second, evenly spaced, as a chatty
                           engine logs ("stub engine: chatty line 00000001 ..."; default 0: none)
POST /v1/completions takes a prompt of token ids or text (ignore_eos: exactly max_tokens words), streamed
with usage as vLLM streams it; at most --max-num-seqs requests generate at once, the rest queue (so a
small batch makes a slower engine). POST /tokenize answers vLLM's shape, a word a token.
GET /metrics: a few of vLLM's families (requests running and waiting, generation tokens, a latency
histogram), counted from the stub's own requests; in SGLang's and llama.cpp's names with --enable-metrics
and --metrics (without them, SGLang answers 404 and llama-server 501, as they do).

Sleep mode (vLLM dialect), as vLLM v0.31.0 serves it: with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1
the development endpoints exist: POST /sleep?level=1&mode=abort|wait, POST /wake_up, GET /is_sleeping
({"is_sleeping": bool}), and a few other development endpoints that answer 200 (/reset_prefix_cache,
/collective_rpc, /server_info...), so a test can show the router never forwards them. A generation request
that arrives while the engine sleeps is not refused: vLLM's scheduler is paused and queues it, so it waits
until /wake_up (then answers), as vLLM's does; the stub counts such requests. Without dev mode these paths
are 404, as in vLLM.
  AIGO_STUB_SLEEP_SECONDS  seconds /sleep takes (default 0)
  AIGO_STUB_WAKE_SECONDS   seconds /wake_up takes (default 0)
  AIGO_STUB_WAKE_FAIL      /wake_up answers 500 and the engine stays asleep
  AIGO_STUB_SLEEP_MODE     acts as started with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1: aigo-apply
                           starts those only on a GPU (vLLM's sleep mode needs CUDA), so a test of a replace
                           that sleeps the old engine, on a host with none, sets this instead
Every answer carries `Access-Control-Allow-Origin: *`, as vLLM's CORS middleware sends by default.
GET /stub/stats (stub only): {"sleeps", "wakes", "asleep", "arrived_asleep", "completions", "inflight",
"max_inflight", "inflight_at_sleep"}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socketserver
import sys
import threading
import time
import urllib.parse
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FACTS = json.load(open(os.environ.get("AIGO_STUB_FACTS", "/opt/aigo-stub/vllm-facts.json")))
_HUMAN = re.compile(r"^(\d+(?:\.\d+)?)([kmgtKMGT]?)$")


def human_int(text: str) -> int:
    if text.lower() in ("auto", "-1"):
        return -1
    match = _HUMAN.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}")
    num, unit = match.groups()
    if not unit:
        return int(num)
    power = "kmgt".index(unit.lower()) + 1
    return int(num) * 1024**power if unit.isupper() else int(float(num) * 1000**power)


def parse_sglang(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m sglang.launch_server")
    p.add_argument("--model-path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--context-length", type=int)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    args = p.parse_args(argv)
    if args.mem_fraction_static is not None and not 0 < args.mem_fraction_static <= 1:
        sys.exit(f"ValueError: mem_fraction_static must be in (0, 1], got {args.mem_fraction_static}")
    if not os.path.isdir(args.model_path):
        sys.exit(f"OSError: {args.model_path} is not a local folder and the hub is offline")
    return argparse.Namespace(model=args.model_path, served_model_name=[args.served_model_name or args.model_path],
                              max_model_len=args.context_length, host=args.host, port=args.port,
                              enable_auto_tool_choice=True, owned_by="sglang", metrics=args.enable_metrics)


def parse_llamacpp(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="llama-server")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("-a", "--alias")
    p.add_argument("-c", "--ctx-size", type=int, default=0)
    p.add_argument("-ngl", "--n-gpu-layers", type=lambda v: v if v in ("auto", "all") else int(v), default="auto")
    p.add_argument("-sm", "--split-mode", choices=["none", "layer", "row"], default="layer")
    p.add_argument("--jinja", action="store_true")
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    args = p.parse_args(argv)
    return argparse.Namespace(model=args.model, served_model_name=[args.alias or args.model],
                              max_model_len=args.ctx_size or 4096, host=args.host, port=args.port,
                              enable_auto_tool_choice=args.jinja, owned_by="llamacpp", metrics=args.metrics)


def parse(argv: list[str]) -> argparse.Namespace:
    if argv and argv[0].startswith("-") and "--served-model-name" in argv:
        sys.exit("ValueError: `model` should be provided as the first positional argument when using `vllm serve`. "
                 "i.e. `vllm serve <model> --<arg> <value>`.")
    p = argparse.ArgumentParser(prog="vllm serve")
    p.add_argument("model", nargs="?", default="Qwen/Qwen3-0.6B")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--max-model-len", type=human_int)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    p.add_argument("--enable-auto-tool-choice", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--tool-call-parser")
    p.add_argument("--reasoning-parser", default="")
    p.add_argument("--moe-backend", type=lambda s: s.lower().replace("-", "_"), choices=FACTS["moe_backends"])
    p.add_argument("--mamba-backend")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--quantization", "-q")
    p.add_argument("--kv-cache-dtype", choices=FACTS["kv_cache_dtypes"])
    p.add_argument("--dtype", choices=FACTS["dtypes"])
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--load-format", type=str.lower, default="auto")
    p.add_argument("--optimization-level", default="2")
    p.add_argument("--cudagraph-capture-sizes", type=int, nargs="+")
    p.add_argument("--max-cudagraph-capture-size", type=int)
    for flag in ("--enable-prefix-caching", "--trust-remote-code", "--enforce-eager"):
        p.add_argument(flag, action=argparse.BooleanOptionalAction)
    p.add_argument("--speculative-config", "-sc", type=json.loads)
    p.add_argument("--enable-sleep-mode", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument("--host", default="")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--uds")
    p.add_argument("--enable-lora", action="store_true")  # LoRA adapters: each NAME=PATH must hold an adapter
    p.add_argument("--lora-modules", nargs="+", default=[])
    p.add_argument("--max-loras", type=int, default=1)
    p.add_argument("--max-lora-rank", type=int, default=16)
    args = p.parse_args(argv)
    for module in args.lora_modules:
        name, _, folder = module.partition("=")
        if not args.enable_lora or not os.path.isfile(os.path.join(folder, "adapter_config.json")):
            sys.exit(f"ValueError: LoRA adapter {name}: no adapter_config.json in {folder} (or --enable-lora unset)")
    if not 0 < args.gpu_memory_utilization <= 1:
        sys.exit("ValueError: gpu_memory_utilization must be in (0, 1]")
    if args.enable_auto_tool_choice:
        if not args.tool_call_parser:
            sys.exit("TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser")
        if args.tool_call_parser not in FACTS["tool_call_parsers"]:
            sys.exit(f"KeyError: invalid tool call parser: {args.tool_call_parser} "
                     f"(chose from {{ {','.join(FACTS['tool_call_parsers'])} }})")
    if args.reasoning_parser and args.reasoning_parser not in FACTS["reasoning_parsers"]:
        sys.exit(f"KeyError: Reasoning parser '{args.reasoning_parser}' not found. "
                 f"Available parsers: {FACTS['reasoning_parsers']}")
    if args.mamba_backend and args.mamba_backend.upper() not in ("TRITON", "FLASHINFER", "CPU"):
        sys.exit(f"ValueError: Unknown Mamba SSU backend: '{args.mamba_backend.upper()}'. "
                 "Valid options are: TRITON, FLASHINFER, CPU")
    spec = args.speculative_config
    if spec is not None:
        unknown = set(spec) - set(FACTS["speculative_info"]["all_keys"])
        if unknown:
            sys.exit(f"pydantic ValidationError: SpeculativeConfig: extra inputs are not permitted: {sorted(unknown)}")
        if "method" in spec and spec["method"] not in FACTS["speculative_methods"]:
            sys.exit(f"pydantic ValidationError: SpeculativeConfig.method: input should be one of "
                     f"{FACTS['speculative_methods']}")
        if "model" in spec and spec["model"].startswith("/") and not os.path.isdir(spec["model"]):
            sys.exit(f"OSError: draft model folder {spec['model']} does not exist")
    if args.load_format not in FACTS["load_formats"]:  # vLLM's get_model_loader, when the weights load
        sys.exit(f"ValueError: Load format `{args.load_format}` is not supported")
    if args.optimization_level not in ("0", "1", "2", "3"):
        sys.exit("pydantic ValidationError: VllmConfig.optimization_level: input should be 0, 1, 2 or 3")
    if args.quantization and args.quantization not in FACTS["quantization_methods"]:
        sys.exit(f"ValueError: Unknown quantization method: {args.quantization}. "
                 f"Must be one of {FACTS['quantization_methods']}")
    args.owned_by = "vllm"
    return args


def error(message: str, kind: str, code: int, param: str | None = None) -> tuple[int, dict]:
    return code, {"error": {"message": message, "type": kind, "param": param, "code": code}}


# vLLM's engine-core process prints the cause; the API server's traceback that follows only points back
_VLLM_FAILURE = "\n".join(
    [
        "ERROR 12-06 16:40:00 [core.py:700] EngineCore failed to start.",
        "ERROR 12-06 16:40:00 [core.py:700] Traceback (most recent call last):",
        'ERROR 12-06 16:40:00 [core.py:700]   File "/usr/lib/python3/vllm/v1/engine/core.py", line 691, in run',
        "ERROR 12-06 16:40:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
        "(stub: the profiling run)",
        "Process EngineCore_DP0:",
    ]
    + [f'  File "/usr/lib/python3/vllm/entrypoints/frame_{i}.py", line {i}, in run_{i}' for i in range(40)]
    + ["RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]
)

class Sleep:
    """The engine's sleep state (vLLM dialect with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1)."""

    lock = threading.Condition()
    asleep = False
    counts = {"sleeps": 0, "wakes": 0, "arrived_asleep": 0, "completions": 0, "inflight": 0, "max_inflight": 0,
              "generation_tokens": 0}
    inflight_at_sleep: list[int] = []  # generation requests running when each /sleep arrived

    @classmethod
    def begin_generation(cls) -> None:
        """A generation request: it waits while the engine sleeps (vLLM queues it), then runs."""
        with cls.lock:
            if cls.asleep:
                cls.counts["arrived_asleep"] += 1
                print("stub engine: a generation request arrived while asleep; it waits for /wake_up", flush=True)
            cls.lock.wait_for(lambda: not cls.asleep, timeout=3600)
            cls.counts["inflight"] += 1
            cls.counts["max_inflight"] = max(cls.counts["max_inflight"], cls.counts["inflight"])

    @classmethod
    def end_generation(cls) -> None:
        with cls.lock:
            cls.counts["inflight"] -= 1
            cls.counts["completions"] += 1
            cls.lock.notify_all()

    @classmethod
    def sleep(cls, mode: str) -> None:
        with cls.lock:
            cls.inflight_at_sleep.append(cls.counts["inflight"])
        if mode == "wait":  # vLLM's mode=wait: running requests finish first (abort: they are cut)
            with cls.lock:
                cls.lock.wait_for(lambda: cls.counts["inflight"] == 0, timeout=3600)
        time.sleep(float(os.environ.get("AIGO_STUB_SLEEP_SECONDS") or 0))
        with cls.lock:
            cls.asleep = True
            cls.counts["sleeps"] += 1
        print(f"stub engine: asleep (mode={mode})", flush=True)

    @classmethod
    def wake(cls) -> bool:
        time.sleep(float(os.environ.get("AIGO_STUB_WAKE_SECONDS") or 0))
        if os.environ.get("AIGO_STUB_WAKE_FAIL"):
            print("stub engine: /wake_up fails as told (AIGO_STUB_WAKE_FAIL)", flush=True)
            return False
        with cls.lock:
            cls.asleep = False
            cls.counts["wakes"] += 1
            cls.lock.notify_all()
        print("stub engine: awake", flush=True)
        return True


# vLLM's development endpoints other than sleep's (entrypoints/serve/dev/): they answer 200 here.
OTHER_DEV_PATHS = {"/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache", "/collective_rpc",
                   "/release_kv_cache_memory", "/pause", "/resume", "/abort_requests"}


def metrics_text(name: str, memory_fraction: float) -> str:
    """A few of vLLM's families as its prometheus_client writes them (labels engine and model_name),
    and its cache config gauge (CacheConfig's fields as labels; 512 blocks of 16 tokens here)."""
    with Sleep.lock:
        running, tokens, done = Sleep.counts["inflight"], Sleep.counts["generation_tokens"], Sleep.counts["completions"]
        asleep = Sleep.asleep
    labels = f'engine="0",model_name="{name}"'
    return "".join(f"{line}\n" for line in [
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",gpu_memory_utilization="{memory_fraction}",'
        'num_cpu_blocks="None",num_gpu_blocks="512",engine="0"} 1.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {float(running)}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {min(1.0, 0.25 * running)}",
        "# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping.",
        "# TYPE vllm:engine_sleep_state gauge",
        f'vllm:engine_sleep_state{{{labels},sleep_state="awake"}} {0.0 if asleep else 1.0}',
        f'vllm:engine_sleep_state{{{labels},sleep_state="weights_offloaded"}} {1.0 if asleep else 0.0}',
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} 0.0",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {float(tokens)}",
        "# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.",
        "# TYPE vllm:e2e_request_latency_seconds histogram",
        f'vllm:e2e_request_latency_seconds_bucket{{{labels},le="0.3"}} {float(done)}',
        f'vllm:e2e_request_latency_seconds_bucket{{{labels},le="+Inf"}} {float(done)}',
        f"vllm:e2e_request_latency_seconds_count{{{labels}}} {float(done)}",
        f"vllm:e2e_request_latency_seconds_sum{{{labels}}} {0.001 * done}",
    ])


def sglang_metrics_text(name: str) -> str:
    """A few of SGLang 0.5.6's families (sglang/srt/metrics/collector.py; label model_name)."""
    with Sleep.lock:
        running, tokens = Sleep.counts["inflight"], Sleep.counts["generation_tokens"]
    labels = f'model_name="{name}",engine_type="unified",tp_rank="0",pp_rank="0"'
    return "".join(f"{line}\n" for line in [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{labels}}} {float(running)}",
        "# HELP sglang:token_usage The token usage.",
        "# TYPE sglang:token_usage gauge",
        f"sglang:token_usage{{{labels}}} {min(1.0, 0.25 * running)}",
        "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
        "# TYPE sglang:generation_tokens_total counter",
        f"sglang:generation_tokens_total{{{labels}}} {float(tokens)}",
    ])


def llamacpp_metrics_text() -> str:
    """A few of llama-server's families (its server README's list; no labels)."""
    with Sleep.lock:
        running, tokens = Sleep.counts["inflight"], Sleep.counts["generation_tokens"]
    return "".join(f"{line}\n" for line in [
        "# HELP llamacpp:requests_processing Number of requests processing.",
        "# TYPE llamacpp:requests_processing gauge",
        f"llamacpp:requests_processing {running}",
        "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.",
        "# TYPE llamacpp:tokens_predicted_total counter",
        f"llamacpp:tokens_predicted_total {tokens}",
    ])


def extra_line(entry: str | dict) -> str:
    """One line of AIGO_STUB_METRICS_EXTRA as the stub writes it (see the module's docstring)."""
    if isinstance(entry, str):
        return f"{entry}\n"
    return entry["line"].replace("{fill}", "x" * int(entry.get("fill", 0))) + entry.get("end", "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall
    args: argparse.Namespace
    names: list[str]
    loading = False  # llama.cpp dialect: the port is open while the model loads, answering 503

    def _transcribe(self, raw: bytes) -> None:
        """POST /v1/audio/transcriptions as vLLM answers it for a speech model: {"text": ...} (the
        stub's text says which model and how many bytes of audio it got)."""
        found = re.search(rb'name="model"\r\n\r\n([^\r]*)\r\n', raw)
        audio = re.search(rb'name="file"[^\r]*\r\n(?:[^\r]+\r\n)*\r\n(.*?)\r\n--', raw, re.S)
        model = found.group(1).decode(errors="replace") if found else ""
        if model not in self.names:
            return self._send(*error(f"The model `{model}` does not exist.", "NotFoundError", 404, "model"))
        size = len(audio.group(1)) if audio else 0
        return self._send(200, {"text": f"stub transcription by {model} of {size} bytes"})

    authorization_seen = 0  # requests that arrived with an Authorization header (the router drops it)

    def end_headers(self) -> None:
        self.send_header("Access-Control-Allow-Origin", "*")  # vLLM's CORS default: every origin
        super().end_headers()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok and self.headers.get("Authorization") is not None:
            Handler.authorization_seen += 1
        return ok

    def address_string(self) -> str:  # a Unix socket's peer has no address
        return "local"

    def log_message(self, *a) -> None:  # keep container logs for our own lines
        pass

    def _send(self, code: int, body: dict | None, content_type: str = "application/json") -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _loading(self) -> bool:
        if self.loading:
            self._send(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
        return self.loading

    def _dev_mode(self) -> bool:
        dev = os.environ.get("VLLM_SERVER_DEV_MODE") == "1" or bool(os.environ.get("AIGO_STUB_SLEEP_MODE"))
        return self.args.owned_by == "vllm" and dev

    def _dev_post(self, path: str, query: dict[str, list[str]]) -> bool:
        """vLLM's development endpoints (POST); False when `path` is not one of them."""
        if path not in ("/sleep", "/wake_up") and path not in OTHER_DEV_PATHS:
            return False
        if path in OTHER_DEV_PATHS:
            self._send(200, {"success": True} if path == "/reset_prefix_cache" else None)
        elif not (self.args.enable_sleep_mode or os.environ.get("AIGO_STUB_SLEEP_MODE")):  # vLLM's worker has no sleep allocator without the flag
            self._send(*error("Sleep mode is not enabled: start vLLM with --enable-sleep-mode",
                              "InternalServerError", 500))
        elif path == "/sleep":
            Sleep.sleep(query.get("mode", ["abort"])[0])
            self._send(200, None)
        elif Sleep.wake():
            self._send(200, None)
        else:
            self._send(*error("wake_up failed: CUDA error: out of memory (stub: AIGO_STUB_WAKE_FAIL)",
                              "InternalServerError", 500))
        return True

    def _served_len(self) -> int:
        """The context length it reports: AIGO_STUB_MAX_MODEL_LEN_CAP caps it, as an engine that
        settles on less than it was given would."""
        cap = os.environ.get("AIGO_STUB_MAX_MODEL_LEN_CAP")
        return min(self.args.max_model_len, int(cap)) if cap and self.args.max_model_len else self.args.max_model_len

    def do_GET(self) -> None:  # noqa: N802
        if self._loading():
            return
        if self.path == "/stub/stats":
            with Sleep.lock:
                return self._send(200, {**Sleep.counts, "asleep": Sleep.asleep,
                                        "inflight_at_sleep": Sleep.inflight_at_sleep,
                                        "authorization_seen": Handler.authorization_seen})
        if self._dev_mode() and self.path == "/is_sleeping":
            return self._send(200, {"is_sleeping": Sleep.asleep})
        if self._dev_mode() and self.path == "/server_info":
            return self._send(200, {"vllm_config": "stub", "vllm_env": {}, "system_env": {}})
        if self.path == "/health":
            time.sleep(HEALTH_SECONDS)
            self._send(200, None)
        elif self.path == "/version":
            self._send(200, {"version": FACTS["version"]})
        elif self.path == "/v1/models":
            cards = [{"id": n, "object": "model", "created": int(START), "owned_by": self.args.owned_by,
                      "root": self.args.model, "parent": None, "max_model_len": self._served_len(),
                      "permission": []} for n in self.names]
            if self.args.owned_by == "llamacpp":  # llama-server's cards carry no max_model_len; /props has n_ctx
                cards = [{"id": n, "object": "model", "created": int(START), "owned_by": "llamacpp"} for n in self.names]
            self._send(200, {"object": "list", "data": cards})
        elif self.path == "/props" and self.args.owned_by == "llamacpp":
            self._send(200, {"default_generation_settings": {"n_ctx": self.args.max_model_len},
                             "model_path": self.args.model, "total_slots": 1})
        elif self.path == "/metrics" and not getattr(self.args, "metrics", True):
            if self.args.owned_by == "llamacpp":  # llama-server without --metrics
                self._send(501, {"error": {"code": 501, "type": "not_supported_error", "message":
                                           "This server does not support metrics endpoint. Start it with `--metrics`"}})
            else:  # SGLang without --enable-metrics mounts no /metrics
                self._send(404, {"detail": "Not Found"})
        elif self.path == "/metrics":
            time.sleep(float(os.environ.get("AIGO_STUB_METRICS_SECONDS") or 0))
            extra = "".join(extra_line(e) for e in json.loads(os.environ.get("AIGO_STUB_METRICS_EXTRA") or "[]"))
            own = (
                sglang_metrics_text(self.names[0]) if self.args.owned_by == "sglang"
                else llamacpp_metrics_text() if self.args.owned_by == "llamacpp"
                else metrics_text(self.names[0], getattr(self.args, "gpu_memory_utilization", 0.9))
            )
            data = (own + extra).encode("utf-8", "surrogateescape")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._send(*error("Not Found", "NotFoundError", 404))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self._loading():
            return
        path, _, query = self.path.partition("?")
        if self._dev_mode() and self._dev_post(path, urllib.parse.parse_qs(query)):
            return
        if self.path == "/v1/audio/transcriptions":  # a multipart upload naming its model in a form field
            return self._transcribe(raw)
        if self.path not in ("/v1/chat/completions", "/v1/completions", "/tokenize"):
            return self._send(*error("Not Found", "NotFoundError", 404))
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            return self._send(*error("Unsupported Media Type: Only 'application/json' is allowed", "BadRequestError", 400))
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(*error("Invalid JSON body", "BadRequestError", 400))
        model = body.get("model")
        if model and model not in self.names:
            return self._send(*error(f"The model `{model}` does not exist.", "NotFoundError", 404, "model"))
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        limit = self.args.max_model_len or 4096
        if max_tokens > limit:
            return self._send(*error(f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. "
                                     f"Please request fewer output tokens.", "BadRequestError", 400, "max_tokens"))
        if body.get("tools") and body.get("tool_choice", "auto") == "auto" and not self.args.enable_auto_tool_choice:
            return self._send(*error('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
                                     "BadRequestError", 400))
        if self.path == "/tokenize":  # vLLM's shape; a word is a token here
            text = body.get("prompt") or ""
            tokens = [zlib.crc32(w.encode()) % VOCAB for w in text.split()]
            return self._send(200, {"count": len(tokens), "max_model_len": limit, "tokens": tokens, "token_strs": None})
        Sleep.begin_generation()
        try:
            with BATCH[0]:  # at most --max-num-seqs requests generate at once; the others queue, as in vLLM
                if self.path == "/v1/completions":
                    self._complete(body, max_tokens)
                else:
                    self._generate(body, max_tokens)
        finally:
            Sleep.end_generation()

    def _complete(self, body: dict, max_tokens: int) -> None:
        """/v1/completions with a prompt of token ids or text: max_tokens words with ignore_eos (else at
        most 4), each taking AIGO_STUB_TOKEN_SECONDS; the words follow from the prompt (and
        AIGO_STUB_OUTPUT_VARIANT, so a test can make the new engine answer otherwise)."""
        prompt = body.get("prompt")
        seed = zlib.crc32((json.dumps(prompt) + os.environ.get("AIGO_STUB_OUTPUT_VARIANT", "")).encode())
        count = int(max_tokens) if body.get("ignore_eos") else max(1, min(int(max_tokens), 4))
        words = [WORDS[(seed + 7 * i) % len(WORDS)] for i in range(count)]
        prompt_tokens = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": count, "total_tokens": prompt_tokens + count}
        rid, created = "cmpl-" + uuid.uuid4().hex, int(time.time())
        if REPLY_SECONDS:
            time.sleep(REPLY_SECONDS)
        if not body.get("stream"):
            time.sleep(TOKEN_SECONDS * count)
            with Sleep.lock:
                Sleep.counts["generation_tokens"] += count
            return self._send(200, {"id": rid, "object": "text_completion", "created": created, "model": self.names[0],
                                    "choices": [{"index": 0, "text": " " + " ".join(words), "finish_reason": "length"}],
                                    "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for word in words:
            time.sleep(TOKEN_SECONDS)
            with Sleep.lock:
                Sleep.counts["generation_tokens"] += 1
            chunk = {"id": rid, "object": "text_completion", "created": created, "model": self.names[0],
                     "choices": [{"index": 0, "text": " " + word, "finish_reason": None}]}
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):
            last = {"id": rid, "object": "text_completion", "created": created, "model": self.names[0],
                    "choices": [], "usage": usage}
            self._chunk(f"data: {json.dumps(last)}\n\n".encode())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _generate(self, body: dict, max_tokens: int) -> None:
        if REPLY_SECONDS:
            time.sleep(REPLY_SECONDS)
        hold = os.environ.get("AIGO_STUB_HOLD_MAX_TOKENS", "").partition(":")
        if hold[0] and int(max_tokens) == int(hold[0]):  # a request it holds without making a token
            time.sleep(float(hold[2] or 12))
        words = ["stub", "reply", "from", self.names[0]][: max(1, min(int(max_tokens), 4))]
        with Sleep.lock:
            Sleep.counts["generation_tokens"] += len(words)
        rid, created = "chatcmpl-" + uuid.uuid4().hex, int(time.time())
        if body.get("stream"):
            return self._stream(rid, created, words)
        self._send(200, {
            "id": rid, "object": "chat.completion", "created": created, "model": self.names[0],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(words)},
                         "finish_reason": "length" if len(words) >= max_tokens else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(words), "total_tokens": 1 + len(words)},
        })

    def _stream(self, rid: str, created: int, words: list[str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        delay = float(os.environ.get("AIGO_STUB_STREAM_DELAY", "0"))
        for i, word in enumerate(words + [None]):
            delta = {"content": (" " if i else "") + word} if word else {}
            chunk = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": self.names[0],
                     "choices": [{"index": 0, "delta": delta, "finish_reason": None if word else "stop"}]}
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            time.sleep(delay)
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


START = time.time()
REPLY_SECONDS = float(os.environ.get("AIGO_STUB_REPLY_SECONDS") or 0)
TOKEN_SECONDS = float(os.environ.get("AIGO_STUB_TOKEN_SECONDS") or 0)
VOCAB = 1000  # the stub's token ids: a word's CRC32 modulo this
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
BATCH = [threading.BoundedSemaphore(256)]  # vLLM's --max-num-seqs (set from the command line in main)
HEALTH_SECONDS = float(os.environ.get("AIGO_STUB_HEALTH_SECONDS") or 0)


def main(dialect: str = "vllm") -> None:
    # PID 1 in a container ignores signals it has no handler for: stop on SIGTERM as vLLM does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    args = {"vllm": parse, "sglang": parse_sglang, "llama.cpp": parse_llamacpp}[dialect](sys.argv[1:])
    names = args.served_model_name or [args.model]
    print(f"stub engine ({dialect}): serving {names} from {args.model} (max_model_len={args.max_model_len}); "
          "loading...", flush=True)
    for name in filter(None, os.environ.get("AIGO_STUB_PRINT_ENV", "").split(",")):
        print(f"stub engine: {name}={os.environ.get(name, '')}", flush=True)  # as a careless engine might
    Handler.args, Handler.names = args, names
    if getattr(args, "max_num_seqs", None):
        BATCH[0] = threading.BoundedSemaphore(args.max_num_seqs)
    ThreadingHTTPServer.request_queue_size = 1024  # many clients at once must not overflow the accept backlog
    server = None
    if dialect == "llama.cpp":  # llama-server listens first and answers 503 until the model is loaded
        Handler.loading = True
        server = serve(args)
    uds = getattr(args, "uds", None)
    if uds:  # vLLM binds its socket before loading (setup_server) and listens once ready
        try:
            server = UnixServer(uds, UnixHandler, bind_and_activate=False)
            server.server_bind()
        except OSError as exc:
            print(f"OSError: [Errno {exc.errno}] {exc.strerror}", flush=True)
            sys.exit(1)
    time.sleep(float(os.environ.get("AIGO_STUB_LOAD_SECONDS", "0.5")))
    while os.environ.get("AIGO_STUB_NEVER_READY"):
        time.sleep(3600)
    if os.environ.get("AIGO_STUB_FAIL_START") == "vllm":  # as vLLM fails: the cause, then a long traceback
        print(_VLLM_FAILURE, flush=True)
        sys.exit(1)
    if os.environ.get("AIGO_STUB_FAIL_START"):
        print("RuntimeError: stub engine told to fail at start-up (AIGO_STUB_FAIL_START)", flush=True)
        sys.exit(1)
    if dialect == "llama.cpp" and not os.path.isfile(args.model):
        print(f"error: failed to load model '{args.model}'", flush=True)
        sys.exit(1)
    Handler.loading = False
    if uds:
        server.server_activate()
        threading.Thread(target=server.serve_forever, daemon=True).start()
    server = server or serve(args)
    crash = os.environ.get("AIGO_STUB_CRASH_AFTER")
    if crash:
        threading.Timer(float(crash), lambda: (print("stub engine: crashing as told", flush=True), os._exit(1))).start()
    print(f"stub engine: ready on {'unix:' + uds if uds else f'port {args.port}'}", flush=True)
    chatty = int(os.environ.get("AIGO_STUB_CHATTY_LINES") or 0)
    if chatty > 0:
        threading.Thread(target=chatter, args=(chatty,), daemon=True).start()
    while True:
        time.sleep(3600)


def chatter(per_second: int) -> None:
    """AIGO_STUB_CHATTY_LINES: numbered lines, `per_second` a second, until the engine stops."""
    count, start = 0, time.monotonic()
    while True:
        count += 1
        print(f"stub engine: chatty line {count:08d} " + "." * 60, flush=True)
        time.sleep(max(0.0, start + count / per_second - time.monotonic()))


class UnixHandler(Handler):
    disable_nagle_algorithm = False  # no TCP on a Unix socket


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 1024


def serve(args: argparse.Namespace) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((args.host or "0.0.0.0", args.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


if __name__ == "__main__":
    main()
