"""The files a kubeconfig names (a user's `tokenFile`, `client-certificate` and `client-key`, a cluster's
`certificate-authority`) are read by the one bounded reader before lightkube sees the kubeconfig, and
handed to it as the entry's inline value, so lightkube never opens a path itself: a `tokenFile` that
was a FIFO hung `plan` forever. Only the files of the context in use are read,
relative paths from the kubeconfig's folder, links followed (a service account's projected token is
one), and each refusal names the kubeconfig, the entry and the file."""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path

import pytest

from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.adapters.kubeconfig import read_kubeconfig
from aigo_apply.errors import KubeUnavailable


def _kubeconfig(tmp_path: Path, user: str, cluster: str = "", other_user: str = "") -> Path:
    path = tmp_path / "kube" / "config"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        f"clusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:1'{cluster}}}\n"
        "contexts:\n- name: lab\n  context: {cluster: c, user: u}\n- name: other\n  context: {cluster: c, user: o}\n"
        f"users:\n- name: u\n  user: {{{user}}}\n- name: o\n  user: {{{other_user or 'token: x'}}}\n",
        encoding="utf-8",
    )
    return path


def _user(data: dict, name: str = "u") -> dict:
    return next(e["user"] for e in data["users"] if e["name"] == name)


def _within(seconds: float, work):
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(result=_catch(work)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "reading the kubeconfig's files waited (a FIFO opened?)"
    return box["result"]


def _catch(work):
    try:
        return work()
    except Exception as exc:  # handed back to the test
        return exc


def test_a_token_file_that_is_a_fifo_is_refused_at_connect_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "token")
    path = _kubeconfig(tmp_path, f"tokenFile: {tmp_path / 'token'}")
    found = _within(5, lambda: KubeClient.connect(str(path)))
    assert isinstance(found, KubeUnavailable), found
    text = str(found)
    assert str(path) in text and "`users[0].user.tokenFile`" in text and str(tmp_path / "token") in text
    assert "FIFO" in text and "not a regular file" in text


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("tokenFile", "users[0].user"),
        ("client-certificate", "users[0].user"),
        ("client-key", "users[0].user"),
        ("certificate-authority", "clusters[0].cluster"),
    ],
)
@pytest.mark.parametrize("hostile", ["fifo", "device", "folder", "huge", "missing"])
def test_each_file_a_kubeconfig_names_is_read_bounded(tmp_path, key, where, hostile):
    target = tmp_path / "named"
    if hostile == "fifo":
        os.mkfifo(target)
    elif hostile == "device":
        target.symlink_to("/dev/zero")
    elif hostile == "folder":
        target.mkdir()
    elif hostile == "huge":
        with open(target, "wb") as f:
            f.truncate(1 << 30)
    entry = f"{key}: {target}"
    if key == "certificate-authority":
        path = _kubeconfig(tmp_path, "token: x", cluster=f", {entry}")
    else:
        path = _kubeconfig(tmp_path, entry)
    found = _within(5, lambda: read_kubeconfig(str(path)))
    assert isinstance(found, KubeUnavailable), found
    assert f"`{where}" in str(found) and str(target) in str(found) and str(path) in str(found), str(found)


def test_the_files_become_inline_values_and_relative_paths_are_the_kubeconfigs_folders(tmp_path):
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "token").write_text(" secret-token \n")
    (kube / "ca.crt").write_bytes(b"CA")
    (kube / "client.crt").write_bytes(b"CERT")
    (kube / "client.key").write_bytes(b"KEY")
    path = _kubeconfig(
        tmp_path,
        "tokenFile: token, client-certificate: client.crt, client-key: client.key",
        cluster=", certificate-authority: ca.crt",
    )
    data = read_kubeconfig(str(path))
    user = _user(data)
    assert user["token"] == "secret-token" and "tokenFile" not in user
    assert base64.b64decode(user["client-certificate-data"]) == b"CERT" and "client-certificate" not in user
    assert base64.b64decode(user["client-key-data"]) == b"KEY" and "client-key" not in user
    cluster = data["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"CA" and "certificate-authority" not in cluster


def test_lightkubes_order_is_kept(tmp_path):
    """A token file over a token, a CA file over its data, client data over client files."""
    (tmp_path / "token").write_text("from-file")
    (tmp_path / "ca").write_bytes(b"FILE-CA")
    data_ca = base64.b64encode(b"DATA-CA").decode()
    path = _kubeconfig(
        tmp_path,
        f"token: inline, tokenFile: {tmp_path / 'token'}, client-certificate-data: Q0VSVA==, "
        f"client-key-data: S0VZ, client-certificate: {tmp_path / 'nope.crt'}, client-key: {tmp_path / 'nope.key'}",
        cluster=f", certificate-authority: {tmp_path / 'ca'}, certificate-authority-data: {data_ca}",
    )
    data = read_kubeconfig(str(path))
    user = _user(data)
    assert user["token"] == "from-file"
    assert user["client-certificate-data"] == "Q0VSVA==" and "client-certificate" not in user  # never read
    assert base64.b64decode(data["clusters"][0]["cluster"]["certificate-authority-data"]) == b"FILE-CA"


def test_only_the_context_in_use_is_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    path = _kubeconfig(tmp_path, "token: x", other_user=f"tokenFile: {tmp_path / 'fifo'}")
    data = _within(5, lambda: read_kubeconfig(str(path)))
    assert _user(data, "o")["tokenFile"] == str(tmp_path / "fifo")  # another context's: left alone
    found = _within(5, lambda: read_kubeconfig(str(path), "other"))
    assert isinstance(found, KubeUnavailable) and "`users[1].user.tokenFile`" in str(found)


def test_a_link_to_the_token_is_followed(tmp_path):
    """A service account's projected token is `token -> ..data/token`."""
    (tmp_path / "..data").mkdir()
    (tmp_path / "..data" / "token").write_text("projected")
    (tmp_path / "token").symlink_to("..data/token")
    path = _kubeconfig(tmp_path, f"tokenFile: {tmp_path / 'token'}")
    assert _user(read_kubeconfig(str(path)))["token"] == "projected"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("clusters: " + "9" * 5000 + "\n", "holds a value YAML cannot read"),
        ("current-context: 2024-13-45\nclusters: []\ncontexts: []\n", "holds a value YAML cannot read"),
        ("x: " + "[" * 100 + "]" * 100 + "\nclusters: []\ncontexts: []\n", "nests deeper than 64 levels"),
        (
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
            + "clusters: []\ncontexts: []\n",
            "holds more than 1000000 values",
        ),
    ],
)
def test_a_kubeconfig_of_odd_values_is_one_clear_error(tmp_path, text, said):
    path = tmp_path / "config"
    path.write_text(text)
    found = _within(10, lambda: read_kubeconfig(str(path)))
    assert isinstance(found, KubeUnavailable) and said in str(found) and str(path) in str(found), found
