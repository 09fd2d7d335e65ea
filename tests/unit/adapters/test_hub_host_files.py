"""What huggingface_hub would read from this host on aigo-apply's behalf is read and checked by
aigo-apply first (adapters/hub_env.py), so an odd file or value is one clear line, never a hang, a
memory blow-up or a traceback, for every command that asks the Hub (plan, models pull, add):

- the token file ($HF_TOKEN_PATH, $HF_HOME/token, $XDG_CACHE_HOME/huggingface/token): a FIFO, a
  device, a folder, a path under a file, a huge file, bytes that are not UTF-8 or a token with a
  control character each name the file and the variable that chose it;
- the files huggingface_hub reads in $HF_HOME by itself (the stored tokens, the agent registry of its
  user agent): never opened, so a FIFO there hangs nothing, and a good token file still opens a gated
  repo through the whole download;
- HF_ENDPOINT and the proxy variables with a host IDNA cannot encode (`a..b`, a label over 63
  characters), a scheme httpx does not speak, a bad port; the two timeouts huggingface_hub parses
  with int() at import. A proxy's password is never printed.

The commands run as the real CLI in a child process, against the local stand-in for the Hub."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aigo_apply.adapters import hub, hub_env
from aigo_apply.errors import HubError

from helpers.cli import run_cli
from helpers.hub import Hub

TOKEN = "hf_" + "Tk9" * 12
CONFIG = """version: 1
project: hubfiles
defaults: {{models_dir: {store}}}
models:
  chat:
    source: {{repo: {repo}, revision: main}}
    context_length: 4096
    gpus: none
"""
FILES = {"config.json": json.dumps({"architectures": ["LlamaForCausalLM"]}).encode(), "model.safetensors": b"w" * 64}
HF_VARIABLES = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "HF_OIDC_RESOURCE",
    "HF_OIDC_ID_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    *hub_env.TIMEOUTS,
    *(f"{s}_proxy" for s in ("http", "https", "all", "no")),
    *(f"{s}_PROXY" for s in ("HTTP", "HTTPS", "ALL", "NO")),
)


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No token, proxy or Hub setting of this machine's; HF_HOME an empty folder of the test's."""
    for name in HF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "hf-home").mkdir()
    return tmp_path


def env_of(**changes: str | None) -> dict[str, str]:
    """The child's environment: this one (already cleaned by the fixture) with `changes`."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def config(tmp_path: Path, repo: str = "org/name") -> Path:
    path = tmp_path / "aigo.yaml"
    path.write_text(CONFIG.format(store=tmp_path / "store", repo=repo))
    return path


def commands(path: Path) -> list[list[str]]:
    """Each command that asks the Hub, for the file at `path`."""
    return [["plan", "-f", str(path)], ["models", "pull", "-f", str(path)], ["add", "org/name", "-f", str(path)]]


def assert_one_line(result, *needles: str, plan: bool) -> None:
    """plan goes on with the Hub's answer unknown (a warning that says why); the others stop with
    exit 1 and one error line. Never a traceback."""
    err = result.stderr
    assert "Traceback" not in err and "internal error" not in err, err
    if plan:
        assert result.returncode == 0, err
        text = result.stdout + err
        line = next((x for x in text.splitlines() if needles[0] in x), "")
    else:
        assert result.returncode == 1, err
        line = err.strip().splitlines()[-1]
        assert line.startswith("error: "), err
    for needle in needles:
        assert needle in line, (needle, result.stdout, err)


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# Each way a token file can be no file to read: (what to make, what the message says)
BAD_TOKEN_FILES = {
    "fifo": (lambda t: _fifo(t / "fifo"), "a FIFO"),
    "device": (lambda t: Path("/dev/zero"), "a device"),
    "link to a device": (lambda t: _link(t / "zero", "/dev/zero"), "a device"),
    "folder": (lambda t: _folder(t / "folder"), "a directory"),
    "under a file": (lambda t: _file(t / "plain", b"x") / "token", "Not a directory"),
    "huge": (lambda t: _file(t / "huge", b"hf_" + b"x" * (1 << 17)), "larger than 64 KiB"),
    "not utf-8": (lambda t: _file(t / "latin", b"hf_caf\xe9"), "not UTF-8"),
    "control character": (lambda t: _file(t / "ctl", b"hf_a\x1bb"), "control character"),
}


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", sorted(BAD_TOKEN_FILES))
def test_a_token_file_that_is_no_token_is_one_line_naming_it(clean, case):
    made, said = BAD_TOKEN_FILES[case]
    token_path = made(clean)
    path = config(clean)
    for command in commands(path):
        result = run_cli(*command, env=env_of(HF_TOKEN_PATH=str(token_path), HF_ENDPOINT="http://127.0.0.1:9"))
        assert_one_line(result, f"token file {token_path} (HF_TOKEN_PATH)", said, plan=command[0] == "plan")


@pytest.mark.parametrize("home", ["/dev/null", "fifo", "file"])
def test_an_hf_home_that_is_no_folder_is_one_line_naming_it(clean, home):
    where = {"/dev/null": Path("/dev/null"), "fifo": clean / "fifo", "file": clean / "file"}[home]
    if home == "fifo":
        _fifo(where)
    elif home == "file":
        where.write_text("x")
    result = run_cli(*commands(config(clean))[1], env=env_of(HF_HOME=str(where), HF_ENDPOINT="http://127.0.0.1:9"))
    assert_one_line(result, f"token file {where}/token (HF_HOME)", "Not a directory", plan=False)


def test_the_token_is_found_where_huggingface_hub_looks_and_an_environment_token_wins(clean, monkeypatch):
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(clean / "xdg"))
    assert hub.token() is None  # nothing anywhere
    _file(_folder(_folder(clean / "xdg") / "huggingface") / "token", f"\n {TOKEN}\r\n".encode())
    assert hub.token() == TOKEN
    monkeypatch.setenv("HF_HOME", "$HOME_OF_HF")
    monkeypatch.setenv("HOME_OF_HF", str(_folder(clean / "home-of-hf")))
    assert hub.token() is None  # HF_HOME (its variables expanded) has none
    _file(clean / "home-of-hf" / "token", b"hf_home_token")
    assert hub.token() == "hf_home_token"
    monkeypatch.setenv("HF_TOKEN_PATH", str(_file(clean / "elsewhere", b"hf_path_token")))
    assert hub.token() == "hf_path_token"
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_old_name")
    assert hub.token() == "hf_old_name"
    monkeypatch.setenv("HF_TOKEN", "hf_new_name")
    assert hub.token() == "hf_new_name"
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    assert hub.token() is None
    monkeypatch.setenv("HF_TOKEN", "hf_\x07bell")
    monkeypatch.delenv("HF_HUB_DISABLE_IMPLICIT_TOKEN")
    with pytest.raises(HubError, match="HF_TOKEN holds characters no Hugging Face token has") as caught:
        hub.token()
    assert "bell" not in str(caught.value)


def test_huggingface_hub_s_own_files_in_hf_home_are_never_read_and_the_token_file_opens_a_gated_repo(clean):
    """Beside a good token file, $HF_HOME holds FIFOs where huggingface_hub itself would read: its
    stored tokens (an OAuth refresh check) and its user agent's registry of AI agents. Reading
    either would hang; the download of a gated repo goes through, with the token from the file."""
    home = clean / "hf-home"
    _file(home / "token", TOKEN.encode())
    for name in ("stored_tokens", ".agent_harnesses.json", "stored_tokens.lock"):
        _fifo(home / name)
    with Hub() as server:
        server.add("org/gated", FILES, gated_token=TOKEN)
        path = config(clean, "org/gated")
        env = env_of(HF_ENDPOINT=server.endpoint)
        pulled = run_cli("models", "pull", "-f", str(path), env=env, timeout=60)
        assert pulled.returncode == 0, pulled.stderr
        assert (clean / "store").is_dir() and any((clean / "store").rglob("model.safetensors"))
        planned = run_cli("plan", "-f", str(path), env=env, timeout=60)
        assert planned.returncode == 0 and "Traceback" not in planned.stderr, planned.stderr
        added = run_cli("add", "org/gated", "-f", str(path), "--alias", "again", env=env, timeout=60)
        assert "gated" not in added.stderr.replace("org/gated", "") and "Traceback" not in added.stderr, added.stderr
        asked = {p for _, p, _ in server.requests}
    assert not any("agent-harnesses" in p for p in asked), asked
    assert not any(p.name == "hub" for p in (clean / "store").rglob("*")), "no cache of huggingface_hub's own"


BAD_ENVIRONMENT = {
    "HF_ENDPOINT=https://a..b": ({"HF_ENDPOINT": "https://a..b"}, "HF_ENDPOINT=https://a..b"),
    "HF_ENDPOINT long label": ({"HF_ENDPOINT": "https://" + "a" * 64 + ".com"}, "HF_ENDPOINT=https://aaaa"),
    "HF_ENDPOINT long name": ({"HF_ENDPOINT": "https://" + "a." * 130 + "com"}, "more than the 253"),
    "HF_ENDPOINT .. with a port": ({"HF_ENDPOINT": "http://x..y:8080"}, "HF_ENDPOINT=http://x..y:8080"),
    "HF_ENDPOINT empty host label": ({"HF_ENDPOINT": "https://.hub"}, "HF_ENDPOINT=https://.hub"),
    "HF_ENDPOINT space": ({"HF_ENDPOINT": "https://hub .co"}, "HF_ENDPOINT="),
    "HTTP_PROXY a..b": ({"HTTP_PROXY": "http://a..b:3128"}, "HTTP_PROXY=http://a..b:3128"),
    "https_proxy long label": ({"https_proxy": "http://" + "p" * 70 + ":1"}, "https_proxy=http://pppp"),
    "ALL_PROXY ftp": ({"ALL_PROXY": "ftp://proxy:21"}, "ALL_PROXY=ftp://proxy:21"),
    "HTTP_PROXY no scheme a..b": ({"HTTP_PROXY": "a..b:3128"}, "HTTP_PROXY=a..b:3128"),
    "HTTP_PROXY bad port": ({"HTTP_PROXY": "http://proxy:99999"}, "HTTP_PROXY=http://proxy:99999"),
    "HTTP_PROXY port no number": ({"HTTP_PROXY": "http://proxy:abc"}, "HTTP_PROXY=http://proxy:abc"),
    "HTTP_PROXY password": ({"HTTP_PROXY": "ftp://me:s3cret-pw@proxy:1"}, "HTTP_PROXY=ftp://***@proxy:1"),
    "HF_HUB_ETAG_TIMEOUT abc": ({"HF_HUB_ETAG_TIMEOUT": "abc"}, "HF_HUB_ETAG_TIMEOUT=abc"),
    "HF_HUB_DOWNLOAD_TIMEOUT empty": ({"HF_HUB_DOWNLOAD_TIMEOUT": ""}, "HF_HUB_DOWNLOAD_TIMEOUT= "),
    "HF_HUB_DOWNLOAD_TIMEOUT 1.5": ({"HF_HUB_DOWNLOAD_TIMEOUT": "1.5"}, "HF_HUB_DOWNLOAD_TIMEOUT=1.5"),
    "HF_HUB_ETAG_TIMEOUT huge": ({"HF_HUB_ETAG_TIMEOUT": "9" * 400}, "HF_HUB_ETAG_TIMEOUT=999"),
    "HF_OIDC_RESOURCE, no CI token": ({"HF_OIDC_RESOURCE": "org/name"}, "HF_OIDC_RESOURCE is set"),
    "HF_OIDC_RESOURCE, no exchange": (
        {"HF_OIDC_RESOURCE": "org/name", "HF_OIDC_ID_TOKEN": "id-token"},
        "HF_OIDC_RESOURCE is set",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ENVIRONMENT))
def test_a_setting_huggingface_hub_cannot_use_is_one_line_naming_it(clean, case):
    changes, said = BAD_ENVIRONMENT[case]
    changes = {"HF_ENDPOINT": "http://127.0.0.1:9", **changes}
    path = config(clean)
    for command in commands(path):
        result = run_cli(*command, env=env_of(**changes))
        assert_one_line(result, said, plan=command[0] == "plan")
        assert "s3cret" not in result.stdout + result.stderr


def test_no_proxy_star_leaves_the_proxy_variables_unread_and_good_settings_pass(clean, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://a..b:1")
    monkeypatch.setenv("NO_PROXY", "localhost, *")
    hub_env.check_environment()  # httpx reads no proxy with NO_PROXY=*
    monkeypatch.delenv("NO_PROXY")
    with pytest.raises(HubError, match="HTTP_PROXY"):
        hub_env.check_environment()
    for name, value in [
        ("HTTP_PROXY", "http://proxy.corp.example:3128"),
        ("HTTPS_PROXY", "proxy.corp.example:3128"),  # httpx takes it as http://
        ("ALL_PROXY", "http://user:pw@[::1]:3128"),
        ("HF_ENDPOINT", "https://hub.bücher.example"),
        ("HF_ENDPOINT", "http://127.0.0.1:8080/"),
        ("HF_HUB_ETAG_TIMEOUT", "30"),
        ("HF_HUB_DOWNLOAD_TIMEOUT", " 0 "),
    ]:
        monkeypatch.setenv(name, value)
        hub_env.check_environment()


def test_stored_tokens_are_read_bounded_and_only_a_token_near_its_end_is_renewed(clean, monkeypatch):
    """An OAuth token of `hf auth login` (its stored_tokens entry has refresh_token and expires_at) is
    handed to huggingface_hub to renew only within a day of its end; a stored-tokens file of any
    other kind (a FIFO, a folder, not INI, another token's entry) is never waited on: the token is
    used as it is."""
    import time

    home = clean / "hf-home"
    _file(home / "token", TOKEN.encode())
    asked = []
    monkeypatch.setattr("huggingface_hub.get_token", lambda: asked.append(1) or "hf_renewed_token")
    stored = home / "stored_tokens"
    for make in (lambda: _fifo(stored), lambda: _folder(stored), lambda: _file(stored, b"\x00[[[not ini")):
        make()
        assert hub.token() == TOKEN and asked == []
        stored.rmdir() if stored.is_dir() else stored.unlink()
    later = int(time.time()) + 30 * 24 * 3600
    for expires, renewed in ((later, False), (int(time.time()) + 60, True), ("soon", False)):
        entry = f"[login]\nhf_token = {TOKEN}\nrefresh_token = r\nexpires_at = {expires}\n"
        _file(stored, (entry + "[other]\nhf_token = hf_other\n").encode())
        assert hub.token() == ("hf_renewed_token" if renewed else TOKEN)
        assert asked == ([1] if renewed else []), expires
        asked.clear()
