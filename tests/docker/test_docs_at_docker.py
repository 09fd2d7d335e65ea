"""The requests the docs show, run as a reader would run them: every ```sh and ```python block marked
`# through the router:` (README.md's curl and OpenAI SDK calls among them; tests/unit/test_docs.py holds
that each such request is marked, goes to the quick start's router and names its models) runs against
a real router and the stub engine, serving the README's quick-start file as `init` writes it, with
`http://127.0.0.1:8000` pointed at that router."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import yaml

from aigo_apply.desired import labels
from aigo_apply.desired.engines.common import legacy_cache_volume

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder
from helpers.doc_blocks import ROUTER_URL, SHELL, Block, quick_start_file, runnable

REQUESTS = runnable()


@pytest.fixture(scope="module")
def router(runtime, tmp_path_factory):
    """The quick start's models on the stub engine behind a real router on a free port: its URL."""
    root = tmp_path_factory.mktemp("docs")
    data = yaml.safe_load(quick_start_file().body)
    project = "t" + uuid.uuid4().hex[:10]
    port = free_port()
    model_folder(root / "m")
    data["project"] = project
    data["router"] = {**data.get("router", {}), "image": "aigo-haproxy", "image_tag": "bookworm", "port": port}
    data["engines"] = {"vllm": {"image": "aigo-stub-engine", "image_tag": "1"}}
    data["defaults"] = {"ready_timeout": 60}
    for model in data["models"].values():  # the stub serves any folder; no GPU here
        model.update(source={"path": "m"}, gpus="none", env={"AIGO_STUB_LOAD_SECONDS": "0.3"})
    path = root / "aigo.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    env = {"AIGO_STATE_DIR": str(root / "state")}
    try:
        applied = run_cli("apply", "-f", str(path), "-y", env=env, timeout=180)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        yield f"http://127.0.0.1:{port}"
    finally:
        run_cli("destroy", "-f", str(path), "-y", env=env, timeout=120)
        for c in runtime.api.containers(all=True, filters=labels.project_filter(project)):
            runtime.api.remove_container(c["Id"], force=True)
        for volume in {v["Name"] for v in runtime.list_volumes(project)} | {legacy_cache_volume(project)}:
            runtime.remove_volume(volume)


def test_the_docs_show_requests_to_run():
    assert any(b.page.name == "README.md" and b.lang == "python" for b in REQUESTS)
    assert any(b.page.name == "README.md" and b.lang in SHELL for b in REQUESTS)


@pytest.mark.parametrize("block", REQUESTS, ids=lambda b: b.where)
def test_each_request_the_docs_show_is_answered_by_the_router(router, block: Block):
    code = block.body.replace(ROUTER_URL, router)
    assert code != block.body, f"{block.where}: does not use {ROUTER_URL}"
    if block.lang == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    said = done.stdout.strip()
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert said and said != "None", f"{block.where}: printed nothing\n{done.stderr}"
    assert '"error"' not in said, f"{block.where}: the router answered with an error:\n{said}"
