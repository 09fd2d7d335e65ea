"""A kubeconfig's exec credential plugin runs within bounds (adapters/kube_exec.py): one that never
answers (`sleep`), prints without end, cannot be started, fails, or answers without a token is one
clear line naming the plugin, never a hang, a memory blow-up or a traceback; a good one's token is
sent, and asked for again when the API server answers 401. A cluster's `server` is never printed
with its user and password, and one that is no URL a connection can be made to (`https://a..b`, a
port of 99999, a scheme of another kind) is one line naming the kubeconfig's entry."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx2
import pytest

from aigo_apply.adapters import kube_exec
from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.adapters.kubeconfig import read_kubeconfig
from aigo_apply.errors import KubeUnavailable

from helpers.paths import ROOT

SECRET = "s3cret-Pw"
CONFIG = """\
version: 1
project: lab
platform: kubernetes
kubernetes: {context: lab, namespace: lab}
models:
  m:
    source: {repo: org/m, revision: main}
    context_length: 4096
    gpus: none
"""


def kubeconfig(tmp_path: Path, user: str, server: str = "https://127.0.0.1:1") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        f"clusters:\n- name: c\n  cluster: {{server: {json.dumps(server)}}}\n"
        "contexts:\n- name: lab\n  context: {cluster: c, user: u, namespace: lab}\n"
        f"users:\n- name: u\n  user: {user}\n",
        encoding="utf-8",
    )
    return path


def plugin(tmp_path: Path, body: str, api: str = "client.authentication.k8s.io/v1beta1") -> str:
    """A user entry whose exec plugin is a shell script with `body`."""
    script = tmp_path / "plugin.sh"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return json.dumps({"exec": {"apiVersion": api, "command": str(script), "args": ["--cluster", "c"]}})


def credential(token: str) -> str:
    return json.dumps(
        {"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "status": {"token": token}}
    )


class Recording(httpx2.BaseTransport):
    """An API server that lists nothing and records each request's Authorization header; the
    requests numbered in `refuse` (from 1) are answered 401 (a token that expired)."""

    def __init__(self, refuse: tuple[int, ...] = ()) -> None:
        self.seen: list[str | None] = []
        self.refuse = refuse

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request.headers.get("authorization"))
        if len(self.seen) in self.refuse:
            return httpx2.Response(401, json={"kind": "Status", "code": 401, "reason": "Unauthorized"})
        return httpx2.Response(200, json={"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []})


def client_of(path: Path, transport: httpx2.BaseTransport | None = None) -> KubeClient:
    from lightkube.config.kubeconfig import KubeConfig

    single = KubeConfig.from_dict(read_kubeconfig(str(path)), fname=path).get()
    return KubeClient._build(single, "lab", transport)


BAD_PLUGINS = {
    "never answers": ("sleep 100\n", "did not answer within 2 s"),
    "keeps printing": ("yes\n", "printed more than 1 MiB"),
    "keeps its output open": ("sleep 100 &\necho '{}'\nexec sleep 100\n", "did not answer within 2 s"),
    "fails": (
        "echo 'token expired: run aws sso login' >&2\nexit 3\n",
        "exited with 3: token expired: run aws sso login",
    ),
    "no JSON": ("echo not-json\n", "is not JSON"),
    "no token": ('echo \'{"status": {"clientCertificateData": "x"}}\'\n', "no status.token"),
    "token of another type": ('echo \'{"status": {"token": 5}}\'\n', "no status.token"),
    "deep JSON": (f"echo '{'[' * 100}{']' * 100}'\n", "nests deeper"),
    "control character": ('printf \'{"status": {"token": "a\\\\u001bb"}}\'\n', "control character"),
}


@pytest.mark.parametrize("case", sorted(BAD_PLUGINS))
def test_a_plugin_that_gives_no_token_is_one_clear_error_without_waiting(tmp_path, monkeypatch, case):
    body, said = BAD_PLUGINS[case]
    monkeypatch.setattr(kube_exec, "EXEC_TIMEOUT", 2.0)
    client = client_of(kubeconfig(tmp_path, plugin(tmp_path, body)), Recording())
    start = time.monotonic()
    with pytest.raises(KubeUnavailable) as caught:
        client.list("Pod")
    assert time.monotonic() - start < 10
    text = str(caught.value)
    assert "cannot get credentials for context 'lab'" in text and "plugin.sh --cluster c" in text, text
    assert said in text and "\n" not in text, text


def test_a_plugin_that_cannot_be_started_or_speaks_another_version_is_one_clear_error(tmp_path):
    missing = json.dumps(
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/nonexistent/get-token"}}
    )
    with pytest.raises(KubeUnavailable, match="cannot be started: No such file"):
        client_of(kubeconfig(tmp_path, missing), Recording()).list("Pod")
    other = plugin(tmp_path, f"echo '{credential('t')}'\n", api="client.authentication.k8s.io/v9")
    with pytest.raises(KubeUnavailable, match="apiVersion 'client.authentication.k8s.io/v9' is none of"):
        client_of(kubeconfig(tmp_path, other), Recording()).list("Pod")


def test_a_good_plugin_s_token_is_sent_and_asked_for_again_after_a_401(tmp_path):
    """Of each apiVersion kubectl speaks (lightkube refused client.authentication.k8s.io/v1)."""
    for api in kube_exec.API_VERSIONS:
        count = tmp_path / f"count-{api.rsplit('/', 1)[1]}"
        body = f"""\
            n=$(cat "{count}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{count}"
            printf '{{"status": {{"token": "tok-%s"}}}}' $n
            """
        server = Recording(refuse=(2,))
        client = client_of(kubeconfig(tmp_path, plugin(tmp_path, body, api)), server)
        assert client.list("Pod") == []
        assert client.list("Pod") == []  # its token expired: a 401, the plugin asked again, the request sent again
        assert client.list("Pod") == []
        assert server.seen == ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2", "Bearer tok-2"], api


def run_plan(tmp_path: Path, kube: Path, timeout_s: float = 60, **env: str) -> subprocess.CompletedProcess:
    """`aigo-apply plan` in a child process, with the plugin's time limit at 2 s (else a minute)."""
    config = tmp_path / "aigo.yaml"
    config.write_text(CONFIG)
    code = (
        "import aigo_apply.adapters.kube_exec as k; k.EXEC_TIMEOUT = 2.0\n"
        "from aigo_apply.cli.main import main\n"
        f"main(['plan', '-f', {str(config)!r}])\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kube), "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s
    )


def test_plan_ends_in_one_line_when_the_plugin_never_answers(tmp_path):
    kube = kubeconfig(tmp_path, plugin(tmp_path, "sleep 100\n"))
    start = time.monotonic()
    result = run_plan(tmp_path, kube)
    assert time.monotonic() - start < 30
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "did not answer within 2 s" in last, result.stderr


BAD_SERVERS = {
    "https://a..b:6443": "is no name",
    "https://" + "k" * 64 + ":6443": "is no name",
    "https://[::1": "Invalid IPv6 URL",
    "https://kube:99999": "out of range",
    "ftp://kube:21": "its scheme is ftp",
    "https://admin:" + SECRET + "@a..b": "is no name",
}


@pytest.mark.parametrize("server", sorted(BAD_SERVERS))
def test_a_server_that_is_no_url_names_the_entry_and_never_its_password(tmp_path, server):
    result = run_plan(tmp_path, kubeconfig(tmp_path, "{token: abc}", server))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "clusters[].cluster.server" in last and BAD_SERVERS[server] in last, result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_a_server_s_password_is_never_printed(tmp_path):
    result = run_plan(tmp_path, kubeconfig(tmp_path, "{token: abc}", f"https://admin:{SECRET}@127.0.0.1:1"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert SECRET not in result.stdout + result.stderr and "https://***@127.0.0.1:1" in result.stderr, result.stderr


BAD_PROXIES = {
    "HTTPS_PROXY": "http://a..b:3128",
    "https_proxy": "http://" + "p" * 64 + ":3128",
    "ALL_PROXY": "http://me:" + SECRET + "@a..b:1",
    "HTTP_PROXY": "ftp://proxy:21",
}


@pytest.mark.parametrize("name", sorted(BAD_PROXIES))
def test_a_proxy_variable_the_client_cannot_use_is_one_line_naming_it(tmp_path, name):
    result = run_plan(tmp_path, kubeconfig(tmp_path, "{token: abc}"), **{name: BAD_PROXIES[name]})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"{name}=" in last and "is not a proxy URL" in last, result.stderr
    assert SECRET not in result.stdout + result.stderr
