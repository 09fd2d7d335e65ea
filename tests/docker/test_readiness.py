"""`aigo-apply readiness` on the real host here: Docker answers, the GPU checks block (this test
machine has no NVIDIA driver or container toolkit), and the demo, which needs no GPU, is not blocked.
Recorded hosts: tests/unit/plan/test_host_checks.py."""

from __future__ import annotations

import json

from helpers.cli import run_cli
from helpers.paths import EXAMPLES


def test_this_host_docker_ok_gpu_blocking_and_demo_unblocked(runtime):
    report = json.loads(run_cli("readiness", "-f", str(EXAMPLES / "single-gpu.yaml"), "-o", "json").stdout)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["docker.engine"]["status"] == "ok"
    assert checks["nvidia.driver"]["status"] == "blocking"
    assert checks["nvidia.driver"]["remediation"].startswith("Install the NVIDIA driver, R580 or newer")
    assert checks["docker.gpu_runtime"]["remediation"].startswith("Install the NVIDIA Container Toolkit")
    assert report["image"]["image_reference"] == "vllm/vllm-openai:v0.31.0" and not report["image"]["tag_overridden"]
    demo = json.loads(run_cli("plan", "-f", str(EXAMPLES / "demo.yaml"), "-o", "json").stdout)
    assert demo["blockers"] == []
    blocked = run_cli("apply", "-f", str(EXAMPLES / "single-gpu.yaml"), "-y")
    assert blocked.returncode == 1 and "apply refused: the plan is blocked" in blocked.stderr
