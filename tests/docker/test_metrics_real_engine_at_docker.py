"""The router's one /metrics with the real vLLM CPU engine (image aigo-vllm-cpu, the tiny generated
model): two models applied by aigo-apply, each a real vLLM serving on its socket, Debian's real
Prometheus scraping the router. Prometheus sees both models' vLLM series under their `model` label and
aigo_engine_up 1 for both, then 0 for one once its engine is stopped; promtool parses a scrape; and
`status` reads the KV cache each real engine settled on from its own cache_config_info gauge. Two
engine starts (about 25 s each alone; slower on a 2-core CI)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
import uuid

import pytest

from helpers import tiny_model
from helpers.configs import free_port, router_yaml
from helpers.real_engine import cli, config_yaml, model_yaml, remove_project, require_image

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason="Debian's prometheus is not installed (scripts/setup)"
    ),
]
IMAGE = tiny_model.IMAGE


@pytest.fixture(scope="module")
def two(runtime, docker_missing, tmp_path_factory):
    require_image(runtime, docker_missing)
    root = tmp_path_factory.mktemp("metrics_real")
    tiny_model.make(root / "tiny", IMAGE)
    project, port = "metrics-real-" + uuid.uuid4().hex[:6], free_port()
    env = {"AIGO_STATE_DIR": str(root / "state")}
    path = root / "aigo.yaml"
    models = model_yaml("first", max_num_seqs=2) + model_yaml("second", max_num_seqs=2)
    path.write_text(config_yaml(project, router_yaml(port), models), encoding="utf-8")
    applied = cli(env, "apply", "-f", str(path), "-y")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    yield project, port, env, path, root
    remove_project(runtime, project, env, path)


def test_status_reads_each_real_engines_kv_cache_from_its_own_gauge(two):
    _, _, env, path, _ = two
    result = cli(env, "status", "-f", str(path), "-o", "json")
    assert result.returncode == 0, result.stderr
    for row in json.loads(result.stdout)["models"]:
        effective = row["effective"]
        assert effective["served_names"] == [row["model"]] and effective["max_model_len"] == 512, effective
        assert effective["block_size"] and effective["kv_cache_blocks"], effective
        assert effective["kv_cache_tokens"] == effective["block_size"] * effective["kv_cache_blocks"]
        assert row["drift"] == [], row["drift"]


def test_debians_prometheus_sees_both_real_engines_then_one_down(two, runtime):
    project, port, _, _, root = two
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        page = reply.read().decode()
    checked = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True, timeout=30)
    assert checked.returncode in (0, 3), checked.stdout + checked.stderr  # 3: lint remarks only (vLLM's ':')
    assert not [line for line in checked.stdout.splitlines() if line.startswith("aigo_")], checked.stdout
    # every line the real vLLM writes passes the router's check: none is left out
    dropped = re.findall(
        rf'^aigo_engine_metrics_dropped_lines\{{project="{project}",model="(\w+)",[^}}]*\}} (\S+)$', page, re.M
    )
    assert sorted(dropped) == [("first", "0"), ("second", "0")], dropped
    web = free_port()
    (root / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        f'scrape_configs: [{{job_name: aigo, static_configs: [{{targets: ["127.0.0.1:{port}"]}}]}}]\n'
    )
    server = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def eventually(expr: str, want: dict[str, str], within: float = 60) -> None:
        deadline, seen = time.monotonic() + within, {}
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
                with urllib.request.urlopen(url, timeout=5) as reply:
                    seen = {r["metric"].get("model", ""): r["value"][1] for r in json.load(reply)["data"]["result"]}
            except OSError:
                seen = {}
            if seen == want:
                return
            time.sleep(0.5)
        raise AssertionError(f"{expr}: {seen}, not {want}")

    try:
        eventually(f'aigo_engine_up{{project="{project}"}}', {"first": "1", "second": "1"})
        eventually(f'vllm:num_requests_running{{project="{project}"}}', {"first": "0", "second": "0"})
        runtime.api.stop(f"aigo-{project}-second", timeout=5)
        eventually(f'aigo_engine_up{{project="{project}"}}', {"first": "1", "second": "0"})
        eventually(f'vllm:num_requests_running{{project="{project}"}}', {"first": "0"})
    finally:
        server.terminate()
        server.wait(timeout=30)
