"""Odd values from the environment and from the engines are one clear line, never a traceback: a
DOCKER_HOST the Docker client cannot use (a port of 99999, `http://[::1`, a port that is no number, an
unknown scheme) names DOCKER_HOST and says what to write, with exit 1,
for every command that talks to Docker; an HF_ENDPOINT of the same kinds names HF_ENDPOINT before
huggingface_hub (whose import parses it) is loaded; an engine's metrics page that says NaN or +Inf is
no number to count (`top` turned NaN into an int)."""

from __future__ import annotations

import pytest

from aigo_apply.adapters import hub
from aigo_apply.adapters.docker_engine import DockerRuntime
from aigo_apply.adapters.engine_metrics import total
from aigo_apply.app.top import rows
from aigo_apply.errors import DockerUnavailable, HubError

from helpers.paths import ROOT

BAD_HOSTS = [
    "tcp://127.0.0.1:99999",
    "http://[::1",
    "tcp://[::1",
    "tcp://127.0.0.1:abc",
    "tcp://127.0.0.1:-1",
    "tcp://127.0.0.1",
    "tcp://:0",
    "tcp://",
    "127.0.0.1",
    "weird://host:1",
    "fd://3",
    "tcp://h:1?x=1",
    "tcp://h:1#x",
    "tcp://user:pass@h:1",
]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_a_docker_host_the_client_cannot_use_names_docker_host(monkeypatch, host):
    monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_CERT_PATH", raising=False)
    runtime = DockerRuntime()
    for call in (runtime.list_containers, runtime.info, lambda: runtime.inspect_image("x:1")):
        with pytest.raises(DockerUnavailable) as caught:
            call()
        text = str(caught.value)
        shown = host.replace(":pass@", ":***@")  # a password in DOCKER_HOST is never printed
        assert f"DOCKER_HOST={shown}" in text and "tcp://HOST:PORT" in text and "\n" not in text, text


def test_tls_settings_that_cannot_be_used_name_them(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2376")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    monkeypatch.setenv("DOCKER_CERT_PATH", str(tmp_path / "no-such-folder"))
    with pytest.raises(DockerUnavailable, match="DOCKER_CERT_PATH"):
        DockerRuntime().list_containers()


@pytest.mark.parametrize("host", ["tcp://127.0.0.1:99999", "http://[::1", "tcp://127.0.0.1:abc"])
@pytest.mark.parametrize("command", [["plan"], ["status"], ["apply", "-y"], ["top", "--once"], ["logs"]])
def test_every_docker_command_ends_in_one_line_and_exit_1(monkeypatch, capsys, host, command):
    from aigo_apply.cli.main import main

    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "-f", str(ROOT / "examples" / "demo.yaml")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1, err
    assert err.count("\n") == 1 and err.startswith("error: ") and f"DOCKER_HOST={host}" in err, err


@pytest.mark.parametrize(
    "endpoint", ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:abc", "notaurl", "ftp://h", "http://:1"]
)
def test_an_hf_endpoint_that_is_no_url_names_hf_endpoint(monkeypatch, endpoint):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    for call in (hub.token, lambda: hub.remote("org/m", "main"), lambda: hub.resolve("org/m", "main")):
        with pytest.raises(HubError) as caught:
            call()
        assert f"HF_ENDPOINT={endpoint}" in str(caught.value) and "unset it" in str(caught.value)


def test_a_good_hf_endpoint_is_kept(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8080/")
    assert hub._endpoint() == "http://127.0.0.1:8080"
    monkeypatch.delenv("HF_ENDPOINT")
    assert hub._endpoint() == "https://huggingface.co"


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "1e999", "nan"])
def test_a_metric_that_is_no_finite_number_is_not_counted(value):
    page = f'vllm:num_requests_running{{engine="0"}} {value}\nvllm:num_requests_running{{engine="1"}} 2\n'
    assert total(page, "vllm:num_requests_running") == 2.0
    alone = f"vllm:num_requests_waiting {value}\n"
    assert total(alone, "vllm:num_requests_waiting") is None
    big = "vllm:generation_tokens_total 1e308\nvllm:generation_tokens_total 1e308\n"  # the sum is infinite
    assert total(big, "vllm:generation_tokens_total") is None
    metrics = {
        name: total(alone.replace("vllm:num_requests_waiting", f"vllm:{name}"), f"vllm:{name}")
        for name in ("num_requests_running", "num_requests_waiting", "generation_tokens_total", "kv_cache_usage_perc")
    }
    sample = {
        "state": "running",
        "running": metrics["num_requests_running"],
        "waiting": metrics["num_requests_waiting"],
        "tokens": metrics["generation_tokens_total"],
        "kv_cache_usage": metrics["kv_cache_usage_perc"],
        "asleep": None,
    }
    (row,) = rows({"at": 0.0, "models": {"m": sample}}, {"at": 1.0, "models": {"m": sample}})
    assert row["requests_running"] is None and row["tokens_per_second"] is None
