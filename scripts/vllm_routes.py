"""Prints every HTTP route the installed vLLM serves, as JSON lines {"method", "path"}: the routes of
the app `vllm serve` builds (with VLLM_SERVER_DEV_MODE=1, so the development routes are there too)
and of every api_router module of vllm.entrypoints (pooling, scoring and audio routers register only
for models of those tasks; 0.34.0's /checkpoint/* router registers whenever sleep mode is on). Run with
the real package (.venv-vllm/bin/python scripts/vllm_routes.py; `--write` stores the output as
tests/fixtures/vllm-vX.Y.Z-routes.jsonl, for a release the unit tests hold the allowlist to);
tests/contract/test_allowlist.py holds the router's allowlist (aigo_apply/router/haproxy_allowlist.py) to it."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import typing
import warnings
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ["VLLM_SERVER_DEV_MODE"] = "1"
warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from vllm_contract import cli_args  # noqa: E402


def main() -> None:
    import vllm
    import vllm.entrypoints as entrypoints
    from fastapi import APIRouter
    from vllm import tasks
    from vllm.entrypoints.launchers.app import build_app
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    found: set[tuple[str, str]] = set()
    args = cli_args().make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", "x"])
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
    text = "".join(json.dumps({"method": m, "path": p}) + "\n" for m, p in sorted(found, key=lambda mp: (mp[1], mp[0])))
    if "--write" in sys.argv:
        out = ROOT / "tests" / "fixtures" / f"vllm-v{vllm.__version__}-routes.jsonl"
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)}", file=sys.stderr)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
