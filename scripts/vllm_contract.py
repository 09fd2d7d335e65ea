#!/usr/bin/env python3
"""Check `vllm serve` command lines with the real vLLM's own parser and pre-load checks.

Runs inside a vLLM venv (scripts/setup-vllm-venv: 0.31.0; scripts/setup-vllm-overlay: 0.34.0), never in
aigo-apply's own: it imports vllm.
Reads a JSON list of argument lists (what follows `vllm serve`) on stdin and writes one JSON result
per command line on stdout: {"accepted": bool, "stage": ..., "error": ..., "deferred": ...}.

The stages are the ones `vllm serve` runs before it loads any weights, in its order:
  parse       ServeSubcommand().subparser_init(...) then parse_args (argparse types and choices);
  serve_args  validate_parsed_serve_args (tool-choice needs a parser, chat template, ...);
  api_server  validate_api_server_args (tool-call and reasoning parser registries), after copying
              --reasoning-parser into structured_outputs_config as EngineArgs.create_engine_config does;
  config      EngineArgs.from_cli_args, then the config objects create_engine_config builds from
              these flags that need no model files: CacheConfig, ParallelConfig, SchedulerConfig,
              the Mamba backend enum, the quantization registry, and the declared type and bounds of
              ModelConfig's max_model_len, SchedulerConfig's max_num_seqs and SpeculativeConfig's
              fields (their cross-field checks compare them with values derived from the model), and
              with --enable-lora the LoRAConfig it builds from --max-loras and --max-lora-rank; the
              optimization level and CUDA-graph sizes against VllmConfig's and CompilationConfig's
              fields, and the load format through get_model_loader, as the engine calls it at load.
Each accepted line also reports the LoRA modules vLLM parsed (`lora_modules`: [name, path] pairs, or
null), so a test can see that every adapter arrived (a repeated --lora-modules keeps only the last), and
what the parser stored for each option of the line (`parsed`: option -> value).
SpeculativeConfig's last check wants the target model's config (read from the weights folder); when
that is the only complaint left, the line is accepted and the message is returned as `deferred`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import sys
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")


def use_cpu_platform() -> None:
    """vLLM infers a GPU platform; without one, building the parser fails ("Failed to infer device type")."""
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms._current_platform = CpuPlatform()


def serve_parser() -> argparse.ArgumentParser:
    """The `vllm` parser with only its `serve` subcommand, built the way vllm's CLI main builds it."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser", required=False)
    ServeSubcommand().subparser_init(subparsers)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse prints its complaint and exits; turn that into a ValueError carrying the text."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(["serve", *argv])
    except SystemExit as exc:
        raise ValueError(err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else str(exc)) from None


def check_api_server(args: argparse.Namespace) -> None:
    """validate_api_server_args, with the reasoning parser where the engine config would have put it."""
    from vllm.entrypoints.launchers.launcher import validate_api_server_args

    if args.reasoning_parser:  # a copy: parse_args hands every namespace the same default object
        args.structured_outputs_config = copy.deepcopy(args.structured_outputs_config)
        args.structured_outputs_config.reasoning_parser = args.reasoning_parser
    validate_api_server_args(args)


def check_config(args: argparse.Namespace) -> str | None:
    """The model-free config objects vLLM builds from these flags; returns a deferred message or None."""
    from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
    from vllm.config.mamba import MambaBackendEnum
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.model_executor.layers.quantization import get_quantization_config

    engine = AsyncEngineArgs.from_cli_args(args)
    check_fields(ModelConfig, {"max_model_len": engine.max_model_len})  # the rest of ModelConfig reads the model
    CacheConfig(gpu_memory_utilization=engine.gpu_memory_utilization, cache_dtype=engine.kv_cache_dtype)
    parallel = ParallelConfig(
        tensor_parallel_size=engine.tensor_parallel_size, pipeline_parallel_size=engine.pipeline_parallel_size
    )
    if engine.max_num_seqs is not None:  # its field only: the batch limits it is compared with are derived later
        check_fields(SchedulerConfig, {"max_num_seqs": engine.max_num_seqs})
    if isinstance(engine.mamba_backend, str):
        MambaBackendEnum[engine.mamba_backend.upper()]
    if engine.quantization is not None:
        get_quantization_config(engine.quantization)
    check_start(engine)
    if engine.enable_lora:  # its own fields' checks (max_loras >= 1, the rank's choices); nothing reads a model
        from vllm.config.lora import LoRAConfig

        LoRAConfig(max_lora_rank=engine.max_lora_rank, max_loras=engine.max_loras)
    return check_speculative(engine, parallel)


def check_start(engine: Any) -> None:
    """What vLLM does at start: VllmConfig's optimization level (an OptimizationLevel), the capture sizes
    against CompilationConfig's fields, and the load format through get_model_loader (which the engine
    calls when it loads the weights: an unknown name, or a loader that needs a loader config, fails there)."""
    from vllm.config import CompilationConfig, VllmConfig
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader

    check_fields(VllmConfig, {"optimization_level": engine.optimization_level})
    sizes = {k: getattr(engine, k) for k in ("cudagraph_capture_sizes", "max_cudagraph_capture_size")}
    check_fields(CompilationConfig, {k: v for k, v in sizes.items() if v is not None})
    try:
        get_model_loader(LoadConfig(load_format=engine.load_format))
    except ImportError:  # a loader package this venv lacks (the image has its own)
        pass


def check_speculative(engine: Any, parallel: Any) -> str | None:
    """SpeculativeConfig's own checks: each key against its pydantic field, then the whole object."""
    from vllm.config import SpeculativeConfig

    if engine.speculative_config is None:
        return None
    config = {k.replace("-", "_"): v for k, v in engine.speculative_config.items()}
    check_fields(SpeculativeConfig, config)
    try:
        SpeculativeConfig(**config, target_model_config=None, target_parallel_config=parallel)
    except Exception as exc:
        if needs_target_model(exc):
            return f"{type(exc).__name__}: {exc}"
        raise
    return None


def check_fields(cls: Any, config: dict[str, Any]) -> None:
    """Unknown keys (extra='forbid') and each value against its pydantic field's declared type and bounds."""
    from typing import Annotated

    from pydantic import TypeAdapter

    fields = cls.__pydantic_fields__
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}")
    for key, value in config.items():
        field = fields[key]
        declared = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        TypeAdapter(declared).validate_python(value)


def needs_target_model(exc: Exception) -> bool:
    """True when the only complaint is that the target model's config (read from its files) is absent."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return all(not e["loc"] and "target_model_config" in e["msg"] for e in exc.errors())
    return isinstance(exc, AttributeError) and "'NoneType' object has no attribute" in str(exc)


def cli_args() -> Any:
    """The module of `vllm serve`'s own argument code: vllm.entrypoints.launchers.cli_args in 0.31.0,
    moved to vllm.entrypoints.common.cli_args by 0.34.0 (same make_arg_parser and checks)."""
    import importlib

    try:
        return importlib.import_module("vllm.entrypoints.common.cli_args")
    except ModuleNotFoundError:
        return importlib.import_module("vllm.entrypoints.launchers.cli_args")


def check(parser: argparse.ArgumentParser, argv: list[str]) -> dict[str, Any]:
    """Run every stage on one command line; the first refusal ends it."""
    validate_parsed_serve_args = cli_args().validate_parsed_serve_args
    stage = "parse"
    try:
        args = parse(parser, argv)
        stage = "serve_args"
        validate_parsed_serve_args(args)
        stage = "api_server"
        check_api_server(args)
        stage = "config"
        deferred = check_config(args)
    except Exception as exc:  # every refusal vLLM raises is a reason to report, whatever its type
        return {"accepted": False, "stage": stage, "error": f"{type(exc).__name__}: {exc}"}
    modules = [[m.name, m.path] for m in args.lora_modules] if args.lora_modules is not None else None
    return {
        "accepted": True,
        "stage": "done",
        "error": None,
        "deferred": deferred,
        "lora_modules": modules,
        "parsed": parsed_values(parser, argv, args),
    }


def parsed_values(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Each option of the line -> the value vLLM's parser stored for it (its action's dest), so a test
    sees what a flag means to this release (`--no-enable-prefix-caching` -> false, a fraction -> itself)."""
    serve = next(a for a in parser._actions if a.dest == "subparser").choices["serve"]
    out: dict[str, Any] = {}
    for option in argv:
        action = serve._option_string_actions.get(option) if option.startswith("--") else None
        if action is not None:
            out[option] = as_json(getattr(args, action.dest, None))
    return out


def as_json(value: Any) -> Any:
    """The value itself where JSON holds it (numbers, text, lists of them), else its repr."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def main() -> int:
    """stdin: JSON list of argument lists; stdout: JSON list of results, same order."""
    command_lines = json.load(sys.stdin)
    use_cpu_platform()
    parser = serve_parser()
    results = [check(parser, argv) for argv in command_lines]
    json.dump(results, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
