"""Prints every HTTP route the installed vLLM serves, as JSON lines {"method", "path"}: the routes of
the app `vllm serve` builds (with VLLM_SERVER_DEV_MODE=1, so the development routes are there too)
and of every api_router module of vllm.entrypoints (pooling, scoring and audio routers register only
for models of those tasks). Run with the real package (.venv-vllm/bin/python scripts/vllm_routes.py);
tests/contract/test_allowlist.py holds the router's allowlist (aigo_apply/router/haproxy_allowlist.py) to it."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import typing
import warnings

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["VLLM_SERVER_DEV_MODE"] = "1"
warnings.simplefilter("ignore")


def main() -> None:
    import vllm.entrypoints as entrypoints
    from fastapi import APIRouter
    from vllm import tasks
    from vllm.entrypoints.launchers.app import build_app
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    found: set[tuple[str, str]] = set()
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "x"])
    app = build_app(args, supported_tasks=tuple(typing.get_args(tasks.GenerationTask)))
    routers = [app.routes]
    for module in pkgutil.walk_packages(entrypoints.__path__, "vllm.entrypoints."):
        if module.name.endswith("api_router"):
            router = getattr(importlib.import_module(module.name), "router", None)
            if isinstance(router, APIRouter):
                routers.append(router.routes)
    for routes in routers:
        for route in routes:
            for method in getattr(route, "methods", None) or ():
                found.add((method, route.path))
    for method, path in sorted(found, key=lambda mp: (mp[1], mp[0])):
        print(json.dumps({"method": method, "path": path}))


if __name__ == "__main__":
    main()
