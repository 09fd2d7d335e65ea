"""The canary gate on the real Docker engine and router with the stub engine: once the new engine of a
parallel replace is ready, the same seeded completions run against it and the old one (each on its own
socket), and the route moves only when the new one is within max_slowdown. A new engine made slower by
its settings (a batch of one request: --max-num-seqs 1, as vLLM's max_num_seqs) is refused, with the
old one serving throughout and no client request failing; an equal one passes; --require-canary blocks
a replace that cannot run its gate, and --skip-canary says that it moved the route untested."""

from __future__ import annotations

import json
import subprocess
import textwrap

import httpx
import pytest

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config
from helpers.load import Load

pytestmark = pytest.mark.slow

GATE = "{requests: 16, concurrency: 4, prompt_tokens: 24, max_tokens: 16, max_slowdown: 0.5, compare_output: true}"


class Project:
    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        self.url = f"http://127.0.0.1:{self.port}"
        folder = model_folder(tmp_path / "m")
        vocab = {f"w{i}": i for i in range(300)}  # the model's own tokenizer: the prompts come from it
        added = [{"id": 0, "content": "w0", "special": True}]
        (folder / "tokenizer.json").write_text(
            json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": added})
        )

    def write(self, env: str = "", vllm: str = "", update: str = "", gate: str = GATE) -> str:
        text = textwrap.dedent(f"""
            version: 1
            project: {self.name}
            engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
            router: {{port: {self.port}, image: aigo-haproxy, image_tag: bookworm}}
            defaults: {{ready_timeout: 60}}
            models:
              chat:
                source: {{path: m}}
                context_length: 4096
                gpus: none
                env: {{AIGO_STUB_LOAD_SECONDS: "1", AIGO_STUB_TOKEN_SECONDS: "0.01"{env}}}
                canary: {gate}
            """)
        text += f"    vllm: {vllm}\n" if vllm else ""
        text += f"    update: {update}\n" if update else ""
        return str(write_config(self.tmp, text))

    def apply(self, path: str, *extra: str) -> subprocess.CompletedProcess:
        return run_cli("apply", "-f", path, "-y", *extra, env=self.env, timeout=240)

    def container_id(self, runtime) -> str:
        return runtime.api.inspect_container(f"aigo-{self.name}-chat")["Id"]


@pytest.fixture
def proj(tmp_path, project):
    p = Project(tmp_path, project)
    first = p.apply(p.write())
    assert first.returncode == 0, first.stdout + first.stderr
    return p


def test_a_new_engine_slowed_by_its_settings_is_refused_and_the_old_one_serves_throughout(proj, runtime):
    old_id = proj.container_id(runtime)
    slower = proj.write(vllm="{max_num_seqs: 1}")  # one request at a time: a quarter of the old one's rate
    planned = run_cli("plan", "-f", slower, env=proj.env)
    assert "(canary: max_slowdown 0.5, 16 requests per engine (4 at a time), 24 prompt and 16 output" in planned.stdout
    change = Load(proj.url, "chat", clients=4, seconds=120).across(lambda: proj.apply(slower))
    result = change.value
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "canary refused the new engine: the new engine makes" in out and "more than max_slowdown 0.5" in out
    assert "output tokens/s" in out and "time to first token p50" in out and "errors" in out
    assert "the new engine was removed, and the previous" in out
    assert not change.failed, change.failed[:5]
    assert len(change.during) >= 20
    assert proj.container_id(runtime) == old_id
    names = [c["Names"][0] for c in runtime.list_containers()]
    assert not [n for n in names if n.startswith(f"/aigo-{proj.name}-chat-aigo")]
    assert (
        httpx.post(
            f"{proj.url}/v1/completions", json={"model": "chat", "prompt": "hi", "max_tokens": 2}, timeout=10
        ).status_code
        == 200
    )
    again = run_cli("plan", "-f", slower, "--detailed-exitcode", env=proj.env)
    assert again.returncode == 2  # the change is still to be made


def test_an_equal_engine_passes_and_the_report_holds_both_measurements(proj, runtime):
    old_id = proj.container_id(runtime)
    result = proj.apply(proj.write(env=', X: "1"'), "-o", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    final = [e for e in events if e["event"] == "result"][-1]
    (gate,) = final["canaries"]
    assert gate["passed"] and gate["model"] == "chat" and gate["settings"]["requests"] == 16
    for side in ("old", "new"):
        assert gate[side]["requests"] == 16 and gate[side]["errors"] == 0
        assert gate[side]["output_tokens_per_second"] > 0 and gate[side]["ttft_p50_seconds"] is not None
    assert gate["outputs_compared"] == 3 and gate["output_differences"] == []  # the same settings, the same words
    assert proj.container_id(runtime) != old_id
    locked = json.loads((proj.tmp / "aigo.lock").read_text())["canary"]["chat"]  # for the record, by the image
    assert locked["image"] == "aigo-stub-engine:1" and locked["image_id"].startswith("sha256:")
    assert locked["new"] == gate["new"] and locked["old"] == gate["old"] and locked["measured_at"]


def test_a_changed_output_is_shown_and_does_not_refuse(proj):
    result = proj.apply(proj.write(env=', AIGO_STUB_OUTPUT_VARIANT: "other"'))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "canary passed" in result.stdout
    assert "greedy outputs of 3 prompts: 3 differ" in result.stdout
    assert "prompt 0: old '" in result.stdout and "prompt 0: new '" in result.stdout


def test_require_canary_blocks_a_replace_that_recreates_and_skip_canary_says_it_skipped(proj, runtime):
    old_id = proj.container_id(runtime)
    recreate = proj.write(env=', X: "1"', update="recreate")
    blocked = proj.apply(recreate, "--require-canary")
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    assert "canary.required: model 'chat' would be replaced untested (--require-canary)" in blocked.stdout
    assert proj.container_id(runtime) == old_id
    skipped = proj.apply(proj.write(env=', X: "2"'), "--skip-canary")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "canary not run: apply --skip-canary moves the route without measuring" in skipped.stdout
    assert proj.container_id(runtime) != old_id


def test_bench_measures_what_runs_now_with_the_models_gate_settings(proj):
    result = run_cli("bench", "-f", proj.write(), "-o", "json", env=proj.env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["models"]
    assert row["model"] == "chat" and row["requests"] == 16 and row["errors"] == 0
    assert row["output_tokens_per_second"] > 0 and row["ttft_p95_seconds"] >= row["ttft_p50_seconds"] > 0
    text = run_cli("bench", "chat", "-f", proj.write(), env=proj.env, timeout=120)
    assert text.returncode == 0 and "output tokens/s" in text.stdout and "\nchat " in text.stdout, text.stdout
    unknown = run_cli("bench", "nope", "-f", proj.write(), env=proj.env)
    assert unknown.returncode != 0 and "no enabled model 'nope'" in unknown.stderr
