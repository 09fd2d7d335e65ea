"""The router's one /metrics on the real Docker engine and HAProxy, with stub engines that write
vLLM's families (one of them hostile, one late): HAProxy's own metrics and every engine's, each engine
series labelled with its model, engine and project, one # HELP and # TYPE per family, aigo_engine_up 0
for an engine that does not answer and aigo_engine_scrape_timeout 1 for one that did not in time, a
page within the gather's deadline, and always text that Debian's promtool and Prometheus read."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
import time
import urllib.parse
import urllib.request

import pytest

from aigo_apply.router.haproxy_metrics import GATHER_S

from helpers.cli import run_cli
from helpers.configs import free_port, model_folder, write_config

# A hostile engine's extra lines, in order (their order matters: a family's state runs on), each with
# whether the router must leave it out (and count it). A line left in is escaped or relabelled, never
# passed through in a way that breaks the page or speaks for the router or another model.
HOSTILE_LINES: list[tuple[str | dict, bool]] = [
    (r'vllm:evil{a="x\q"} 1', True),  # an escape Prometheus does not have
    ("haproxy_process_nbthread 99", True),  # a name the router keeps
    ('aigo_engine_up{model="chat"} 1', True),  # the router's own family, spoofed
    ("this is not a sample", True),
    ("# TYPE vllm:num_requests_running counter", True),  # a second TYPE for a family, contradicting
    ('vllm:num_requests_running{engine="0",model_name="tools"} 5', True),  # a repeated series
    ('vllm:labelled{project="someone-else",model="chat"} 7', False),  # labels the router sets
    (r'vllm:quoted{note="a \"quote\" and a\nline"} 1', False),  # escapes kept as escapes
    ('vllm:novalue{a="b"}', True),
    ("vllm:badvalue 12abc", True),
    ("vllm:huge_value 1e999", True),  # beyond float64: Prometheus refuses the whole page for it
    ("vllm:future 1 9223372036854775808", True),  # a timestamp beyond int64
    ("vllm:max_time 1 9223372036854775807", False),
    ("vllm:negative_time 1 -5", True),  # Prometheus' scraper takes no sign (promtool does)
    ("vllm:odd_nan nan", True),  # NaN as Prometheus writes it only
    ("vllm:odd_inf Infinity", True),
    ("vllm:fine_nan NaN", False),
    ('vllm:cr{a="x\ry"} 1', True),  # a carriage return inside a label value
    ("vllm:crlf 1\r", True),  # a CRLF line end
    ({"line": 'vllm:huge{a="{fill}"} 1', "fill": 70000}, True),  # a 70 KB line
    ('vllm:latin{a="\udcff"} 1', True),  # a byte that is not UTF-8
    ('vllm:nul{a="x\u0000y"} 1', True),
    ('vllm:pair{b="2",a="1"} 1', False),
    ('vllm:pair{a="1",b="2"} 2', True),  # the same series, its labels in another order
    ('vllm:empty{a=""} 1', False),
    ("vllm:empty 2", True),  # the same series: an empty label is no label
    ("# TYPE vllm:lat histogram", False),
    ('vllm:lat_bucket{le="0.5"} 1', False),
    ('vllm:lat_bucket{le="0.50"} 1', True),  # the same bucket
    ('vllm:lat_bucket{le="half"} 1', True),  # a bucket bound that is no number
    ('vllm:lat_bucket{le="+Inf"} 1', False),
    ("vllm:lat_sum 1", False),
    ("vllm:lat_count 1", False),
    ("# TYPE vllm:lat_count gauge", True),  # a family named like another's samples
    ("vllm:late 1", False),
    ("# TYPE vllm:late gauge", True),  # a TYPE after its family's samples
    ('vllm:late{x="1"} 2', True),  # and so this family's samples under it
    ("vllm-dash 1", True),
    ({"line": "vllm:cut 12", "end": ""}, True),  # the last line without its line feed: maybe cut
]
HOSTILE = json.dumps([line for line, _ in HOSTILE_LINES])
DROPPED_FROM_HOSTILE = sum(dropped for _, dropped in HOSTILE_LINES)


class Project:
    def __init__(self, tmp_path, name):
        self.tmp, self.name, self.port = tmp_path, name, free_port()
        self.env = {"AIGO_STATE_DIR": str(tmp_path / "state")}
        self.url = f"http://127.0.0.1:{self.port}"
        model_folder(tmp_path / "m")

    def write(self, tools_env: str = "") -> str:
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
              tools:
                source: {{path: m}}
                context_length: 4096
                gpus: none
                env: {{AIGO_STUB_LOAD_SECONDS: "0.3"{tools_env}}}
            """)
        return str(write_config(self.tmp, text))

    def apply(self, path: str) -> None:
        result = run_cli("apply", "-f", path, "-y", env=self.env, timeout=180)
        assert result.returncode == 0, result.stdout + result.stderr

    def scrape(self, headers: dict[str, str] | None = None) -> str:
        request = urllib.request.Request(f"{self.url}/metrics", headers=headers or {})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200
            assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
            return reply.read().decode()  # strictly UTF-8: an engine's other bytes never reach the page

    def chat(self, alias: str) -> None:
        body = json.dumps({"model": alias, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        request = urllib.request.Request(
            f"{self.url}/v1/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
        )
        urllib.request.urlopen(request, timeout=10).read()


@pytest.fixture
def proj(tmp_path, project):
    return Project(tmp_path, project)


def samples(text: str, name: str) -> dict[str, str]:
    """{labels: value} of every sample of `name` on the page."""
    return {m[1]: m[2] for m in re.finditer(rf"^{re.escape(name)}\{{([^\n]*)\}} (\S+)$", text, re.M)}


def promtool(text: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


needs_prometheus = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="Debian's prometheus is not installed (scripts/setup installs it)"
)


@needs_prometheus
def test_one_page_holds_the_routers_and_every_engines_metrics_labelled_by_model(proj):
    proj.apply(proj.write(tools_env=f", AIGO_STUB_METRICS_EXTRA: '{HOSTILE}'"))
    series = f'project="{proj.name}",model="chat",engine="vllm",exported_engine="0",model_name="chat"'
    before = float(samples(proj.scrape(), "vllm:generation_tokens_total")[series])
    proj.chat("chat")
    page = proj.scrape()
    assert "haproxy_process_nbthread" in page and "haproxy_frontend_http_requests_total" in page
    running = samples(page, "vllm:num_requests_running")
    for alias in ("chat", "tools"):  # vLLM's own engine label is kept, as Prometheus keeps a clash
        assert (
            f'project="{proj.name}",model="{alias}",engine="vllm",exported_engine="0",model_name="{alias}"' in running
        )
    assert len(running) == 2  # the hostile engine's repeat of its series is dropped
    assert page.count("# TYPE vllm:num_requests_running gauge\n") == 1
    assert page.count("# TYPE vllm:num_requests_running") == 1
    assert page.count("# HELP vllm:generation_tokens_total ") == 1
    assert float(samples(page, "vllm:generation_tokens_total")[series]) == before + 3  # read on each scrape
    assert len(samples(page, "vllm:e2e_request_latency_seconds_bucket")) == 4  # 2 buckets x 2 models
    up = samples(page, "aigo_engine_up")
    assert up == {f'project="{proj.name}",model="{a}",engine="vllm"': "1" for a in ("chat", "tools")}
    assert "haproxy_process_nbthread 99" not in page and "vllm:evil" not in page and "not a sample" not in page
    # the labels the router sets are its own; the engine's are kept as exported_*
    labelled = samples(page, "vllm:labelled")
    assert labelled == {
        f'project="{proj.name}",model="tools",engine="vllm",exported_model="chat",exported_project="someone-else"': "7"
    }
    tools = f'project="{proj.name}",model="tools",engine="vllm"'
    for kept in (
        f"vllm:max_time{{{tools}}} 1 9223372036854775807",
        f"vllm:fine_nan{{{tools}}} NaN",
        f'vllm:pair{{{tools},a="1",b="2"}} 1',
        f'vllm:empty{{{tools},a=""}} 1',
        f'vllm:lat_bucket{{{tools},le="0.5"}} 1',
        f'vllm:lat_bucket{{{tools},le="+Inf"}} 1',
        f"vllm:late{{{tools}}} 1",
    ):
        assert f"\n{kept}\n" in page, kept
    for left_out in ("1e999", "9223372036854775808", "vllm:negative_time", "vllm:odd_", "vllm:cr", "vllm:huge"):
        assert left_out not in page, left_out
    for left_out in ("vllm:latin", "vllm:nul", "vllm:cut", "half", "# TYPE vllm:lat_count", "# TYPE vllm:late"):
        assert left_out not in page, left_out
    assert "\r" not in page and "\0" not in page
    assert samples(page, "vllm:quoted") == {
        f'project="{proj.name}",model="tools",engine="vllm",note="a \\"quote\\" and a\\nline"': "1"
    }
    dropped = samples(page, "aigo_engine_metrics_dropped_lines")
    assert dropped[f'project="{proj.name}",model="tools",engine="vllm"'] == str(DROPPED_FROM_HOSTILE)
    assert dropped[f'project="{proj.name}",model="chat",engine="vllm"'] == "0"
    checked = promtool(page)
    # 0: clean; 3: it parsed, with lint remarks only, and those are about names vLLM and HAProxy chose
    # (vLLM's ':' in its names, a HAProxy counter without _total, the hostile engine's own families)
    assert checked.returncode in (0, 3), checked.stdout + checked.stderr
    remarks = [line for line in checked.stdout.splitlines() if line.strip()]
    assert not [r for r in remarks if r.startswith("aigo_")], remarks
    assert all(r.startswith(("vllm:", "haproxy_")) for r in remarks), remarks


@needs_prometheus
def test_a_late_engine_is_left_out_and_named_and_the_page_comes_within_the_deadline(proj, runtime):
    """One deadline for the whole gather (GATHER_S from the request's arrival, or half the scrape timeout
    Prometheus says when that is shorter): an engine that has not answered by then is left out of that
    page and named late, and the page is a 200 in time, whatever the engine does."""
    proj.apply(proj.write(tools_env=', AIGO_STUB_METRICS_SECONDS: "30"'))  # answers after 30 s
    chat, tools = (f'project="{proj.name}",model="{alias}",engine="vllm"' for alias in ("chat", "tools"))
    # within: the page in the scraper's own timeout (half of Prometheus' default without one said)
    for said, within in ((None, GATHER_S * 2), ("10", GATHER_S * 2), ("1.5", 1.5), ("1", 1.0)):
        started = time.monotonic()
        page = proj.scrape({"X-Prometheus-Scrape-Timeout-Seconds": said} if said else None)
        took = time.monotonic() - started
        assert took < within, (said, took)
        assert samples(page, "aigo_engine_up") == {chat: "1", tools: "0"}
        assert samples(page, "aigo_engine_scrape_timeout") == {chat: "0", tools: "1"}
        assert not [k for k in samples(page, "vllm:num_requests_running") if 'model="tools"' in k]
        assert [k for k in samples(page, "vllm:num_requests_running") if 'model="chat"' in k]
        checked = promtool(page)
        assert checked.returncode in (0, 3), checked.stdout + checked.stderr
    runtime.api.stop(f"aigo-{proj.name}-chat", timeout=1)
    page = proj.scrape()
    assert samples(page, "aigo_engine_up")[chat] == "0"
    assert samples(page, "aigo_engine_scrape_timeout")[chat] == "0"  # refused at once: down, not late
    assert not [k for k in samples(page, "vllm:num_requests_running") if 'model="chat"' in k]
    assert "haproxy_process_nbthread" in page  # the router's own still there


@needs_prometheus
def test_debians_prometheus_scrapes_the_router_and_sees_both_models(proj, runtime, tmp_path):
    """Prometheus itself takes the whole page while one engine writes every kind of bad line (its parser
    is stricter than promtool's: a signed timestamp fails the scrape), so the healthy engine's numbers
    are never lost with it."""
    proj.apply(proj.write(tools_env=f", AIGO_STUB_METRICS_EXTRA: '{HOSTILE}'"))
    web = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        textwrap.dedent(f"""
        global: {{scrape_interval: 1s, scrape_timeout: 1s}}
        scrape_configs:
          - job_name: aigo
            static_configs: [{{targets: ["127.0.0.1:{proj.port}"]}}]
        """)
    )
    server = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def query(expr: str) -> dict[str, str]:
        url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as reply:
            result = json.load(reply)["data"]["result"]
        return {r["metric"].get("model", ""): r["value"][1] for r in result}

    def eventually(expr: str, want: dict[str, str], within: float = 30) -> dict[str, str]:
        deadline, seen = time.monotonic() + within, {}
        while time.monotonic() < deadline:
            try:
                seen = query(expr)
            except OSError:
                seen = {}
            if seen == want:
                return seen
            time.sleep(0.5)
        raise AssertionError(f"{expr}: {seen}, not {want}")

    try:
        eventually(f'aigo_engine_up{{project="{proj.name}"}}', {"chat": "1", "tools": "1"})
        eventually(f'vllm:num_requests_running{{project="{proj.name}"}}', {"chat": "0", "tools": "0"})
        eventually('up{job="aigo"}', {"": "1"})  # Prometheus took the whole page
        eventually(f'vllm:pair{{project="{proj.name}"}}', {"tools": "1"})  # the hostile engine's good lines too
        runtime.api.stop(f"aigo-{proj.name}-tools", timeout=1)
        eventually(f'aigo_engine_up{{project="{proj.name}"}}', {"chat": "1", "tools": "0"})
        eventually(f'vllm:num_requests_running{{project="{proj.name}"}}', {"chat": "0"}, within=60)
    finally:
        server.terminate()
        server.wait(timeout=30)
