"""Secrets: references resolve only from regular, small, UTF-8 files outside the
host's system and private folders, without ever blocking; values hold no control characters; the
Hugging Face token never reaches a container under any name; credentials in clear are refused where
they are written; nothing prints a value (messages, journal, reporters and the error boundary)."""

from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest

from aigo_apply.cli.reporter import JsonReporter, TextReporter
from aigo_apply.desired.types import SecretRef
from aigo_apply.errors import ConfigInvalid, SecretUnavailable
from aigo_apply.observe import host_paths
from aigo_apply.observe.config_file import load_config
from aigo_apply.platforms import secrets
from aigo_apply.platforms.docker.secret_checks import reference_checks
from aigo_apply.platforms.journal import Journal
from aigo_apply.platforms.secrets import container_env, env_value, redact, resolve

from helpers.configs import write_config
from helpers.planner_inputs import desired

GOOD = """
version: 1
project: lab
models:
  qwen:
    source: {repo: Qwen/Qwen3-8B}
    context_length: 32768
"""

HF = "hf_" + "A1b2C3d4" * 5  # looks like a Hugging Face token
WHERE = "models.m.env.MY_SECRET"


@pytest.fixture(autouse=True)
def clean_hub(monkeypatch, tmp_path):
    """No Hugging Face token from the machine running the tests; its cache in tmp_path; no other
    account's home (the machine's own would make a tmp_path below one of them refused)."""
    monkeypatch.setattr(host_paths, "known_homes", lambda: ())
    for name in list(os.environ):
        if "TOKEN" in name.upper():
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield
    secrets._known.clear()  # what this test resolved must not redact other tests' output
    monkeypatch.delenv("HF_TOKEN_PATH", raising=False)


def problems(tmp_path, text: str) -> list[str]:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


def refused(ref: SecretRef, multiline: bool = False) -> str:
    with pytest.raises(SecretUnavailable) as info:
        resolve(ref, WHERE, multiline)
    message = str(info.value)
    assert message.startswith(WHERE + ": ") and "(nothing was changed)" in message
    return message


def secret_file(tmp_path, content: bytes, name: str = "secret") -> str:
    path = tmp_path / name
    path.write_bytes(content)
    return str(path)


# -- reading files ---------------------------------------------------------------------------------
def test_a_good_file_is_read_and_trimmed(tmp_path):
    assert resolve(SecretRef("from_file", secret_file(tmp_path, b"  s3cret-value\n")), WHERE) == "s3cret-value"


def test_a_fifo_is_refused_at_once_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(refused(SecretRef("from_file", str(fifo)))), daemon=True)
    start = time.monotonic()
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive(), "reading a FIFO secret blocked"
    assert time.monotonic() - start < 2
    assert "is a FIFO (named pipe), not a regular file" in outcome[0]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"QQQ\x00ZZZ", "holds a control character"),
        (b"QQQ\x1b[31mZZZ", "holds a control character"),
        (b"QQQ-one\nZZZ-two", "holds a control character"),
        (b"QQQ\x7fZZZ", "holds a control character"),
        ("QQQ\u0085ZZZ".encode(), "holds a control character"),
        (b"", "is empty"),
        (b"  \n\t\n", "is empty"),
        (b"\xff\xfe-not-utf8", "is not UTF-8 text"),
        (b"QQQ" * 30000, "is larger than 65536 bytes"),
    ],
)
def test_bad_contents_are_refused_without_showing_them(tmp_path, content, expected):
    message = refused(SecretRef("from_file", secret_file(tmp_path, content)))
    assert expected in message
    assert "QQQ" not in message and "ZZZ" not in message


@pytest.mark.parametrize(
    "target, expected",
    [
        ("/dev/zero", "inside the system folder /dev"),
        ("/dev/stdin", "inside the system folder /dev"),
        ("/etc/shadow", "inside the system folder /etc"),
        ("/proc/self/environ", "inside the system folder /proc"),
        ("/etc/../etc/./shadow", "inside the system folder /etc"),
        ("~/.ssh/id_rsa", "inside the private folder ~/.ssh"),
        ("~/.aws/credentials", "inside the private folder ~/.aws"),
        ("~/.netrc", "the private file ~/.netrc"),
        ("/home/someone/.docker/config.json", "inside the private folder /home/someone/.docker"),
        ("relative/secret", "is not an absolute path"),
    ],
)
def test_system_private_and_relative_files_are_refused(target, expected):
    assert expected in refused(SecretRef("from_file", target))


@pytest.mark.parametrize("aim", ["/dev/zero", "/etc/shadow", "/etc/hostname"])
def test_a_link_into_a_system_folder_is_refused(tmp_path, aim):
    link = tmp_path / "innocent"
    link.symlink_to(aim)
    assert f"(a link to {aim})" in refused(SecretRef("from_file", str(link)))


def test_a_folder_is_refused(tmp_path):
    assert "is a directory, not a regular file" in refused(SecretRef("from_file", str(tmp_path)))


def test_a_missing_file_says_so(tmp_path):
    assert "cannot be read: No such file or directory" in refused(SecretRef("from_file", str(tmp_path / "nope")))


# -- environment variables ---------------------------------------------------------------------------
def test_an_unset_variable_is_refused(monkeypatch):
    monkeypatch.delenv("AIGO_UNIT_UNSET", raising=False)
    assert "the environment variable AIGO_UNIT_UNSET is not set" in refused(SecretRef("from_env", "AIGO_UNIT_UNSET"))


@pytest.mark.parametrize("value", ["a\x01b-value", "two\nlines", "", "x" * (64 * 1024 + 1)])
def test_environment_values_get_the_same_checks(monkeypatch, value):
    monkeypatch.setenv("AIGO_UNIT_VALUE", value)
    message = refused(SecretRef("from_env", "AIGO_UNIT_VALUE"))
    assert any(w in message for w in ("control character", "is empty", "larger than"))
    assert not value or value[:4] not in message.replace("AIGO_UNIT_VALUE", "")


def test_router_keys_may_span_lines(tmp_path):
    path = secret_file(tmp_path, b"key-one-aaaa\r\nkey-two-bbbb\n")
    assert resolve(SecretRef("from_file", path), "router.api_keys", multiline=True) == "key-one-aaaa\nkey-two-bbbb"
    assert "control character" in refused(SecretRef("from_file", secret_file(tmp_path, b"k1\nk\x002")), True)


# -- the Hugging Face token ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_READ_TOKEN", "hf_token"])
def test_no_reference_reads_a_hub_token_variable(monkeypatch, name):
    monkeypatch.setenv(name, "whatever-value")
    assert "holds the Hugging Face token" in refused(SecretRef("from_env", name))


def test_the_hosts_token_is_refused_under_any_name(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "plain-token-1234")
    monkeypatch.setenv("INNOCENT", "plain-token-1234")
    assert "holds the Hugging Face token" in refused(SecretRef("from_env", "INNOCENT"))
    copy = secret_file(tmp_path, b"plain-token-1234\n", "copy")
    assert "holds the Hugging Face token" in refused(SecretRef("from_file", copy))
    both = secret_file(tmp_path, b"other-key-9999\nplain-token-1234\n", "keys")
    assert "holds the Hugging Face token" in refused(SecretRef("from_file", both), multiline=True)


def test_the_token_file_and_its_copies_are_refused(monkeypatch, tmp_path):
    home = tmp_path / "hf-home"
    home.mkdir()
    (home / "token").write_text("file-token-5678\n")
    assert "the Hugging Face token file" in refused(SecretRef("from_file", str(home / "token")))
    assert "holds the Hugging Face token" in refused(SecretRef("from_file", secret_file(tmp_path, b"file-token-5678")))
    elsewhere = secret_file(tmp_path, b"path-token-0000", "tok")
    monkeypatch.setenv("HF_TOKEN_PATH", elsewhere)
    assert "the Hugging Face token file" in refused(SecretRef("from_file", elsewhere))
    assert "the Hugging Face token file" in refused(SecretRef("from_file", "~/.cache/huggingface/token"))


def test_a_value_that_looks_like_a_hub_token_is_refused(monkeypatch):
    monkeypatch.setenv("SOME_KEY", HF)
    assert "holds the Hugging Face token" in refused(SecretRef("from_env", "SOME_KEY"))


def test_container_env_checks_a_saved_specs_entries_again(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "plain-token-1234")
    for name, value in [("HF_TOKEN", "x"), ("HUGGING_FACE_HUB_TOKEN", SecretRef("from_env", "X"))]:
        with pytest.raises(SecretUnavailable, match="never get a Hugging Face token"):
            env_value(name, value, f"models.m.env.{name}")
    for value in ["plain-token-1234", "sk-" + "a" * 20, HF]:
        with pytest.raises(
            SecretUnavailable, match="the value looks like .+ written in clear; pass it by reference"
        ) as info:
            env_value("OTHER", value, "models.m.env.OTHER")
        assert value not in str(info.value)
    monkeypatch.setenv("GOOD", "good-value")
    assert env_value("OTHER", SecretRef("from_env", "GOOD"), "w") == "good-value"


# -- validation: located errors -----------------------------------------------------------------
@pytest.mark.parametrize(
    "entry, expected",
    [
        ("{OPENAI: sk-proj-abcdefghijklmnop1234}", "F:8:19: models.qwen.env.OPENAI: the value looks like an API key"),
        (f"{{HUB: {HF}}}", "models.qwen.env.HUB: the value looks like a Hugging Face token"),
        ("{GH: ghp_abcdefghijklmnopqrstuvwx}", "models.qwen.env.GH: the value looks like a GitHub token"),
        ("{AWS: AKIAABCDEFGHIJKLMNOP}", "models.qwen.env.AWS: the value looks like an AWS access key"),
        ("{SLACK: xoxb-1234567890-abc}", "models.qwen.env.SLACK: the value looks like a Slack token"),
        ("{DB: 'postgres://me:pw@db/x'}", "models.qwen.env.DB: the value looks like a URL with a password"),
        ("{J: eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.sig}", "models.qwen.env.J: the value looks like a signed token"),
        ("{K: '-----BEGIN RSA PRIVATE KEY-----'}", "models.qwen.env.K: the value looks like a private key"),
        ("{HUB: {from_env: HF_TOKEN}}", "models.qwen.env.HUB: HF_TOKEN holds the Hugging Face token"),
        ("{HUB: {from_env: HUGGINGFACE_HUB_TOKEN}}", "HUGGINGFACE_HUB_TOKEN holds the Hugging Face token"),
        ("{S: {from_file: /etc/shadow}}", "models.qwen.env.S: the secret file '/etc/shadow' is inside the system"),
        ("{S: {from_file: /dev/zero}}", "the secret file '/dev/zero' is inside the system folder /dev"),
        ("{S: {from_file: ~/.ssh/id_ed25519}}", "is inside the private folder ~/.ssh"),
        ("{S: {from_file: ~/.cache/huggingface/token}}", "is the Hugging Face token file"),
        ("{S: {from_file: secrets/key}}", "the secret file 'secrets/key' must be an absolute path"),
    ],
)
def test_validation_refuses_credentials_and_unsafe_references(tmp_path, entry, expected):
    text = GOOD.replace("    context_length: 32768\n", f"    context_length: 32768\n    gpus: none\n    env: {entry}\n")
    found = " | ".join(problems(tmp_path, text))
    assert expected in found, found
    for secret in ("abcdefghijklmnop", HF, "AKIAABCDEFGHIJKLMNOP", "me:pw@"):
        assert secret not in found


def test_validation_refuses_credentials_outside_env(tmp_path):
    text = GOOD.replace("  qwen:", "  sk-abcdefghijklmnopqrstuvwx:")
    found = " ".join(problems(tmp_path, text))
    assert "models.<an API key (sk-...), not shown>: this name looks like an API key" in found
    assert "abcdefghijklmnop" not in found  # the key is in the location too: never printed there


def test_ordinary_values_and_safe_references_validate(tmp_path):
    env = "{LOG: debug, URL: 'http://host:8080/x', SK: sk-short, P: {from_file: ~/.aigo/secrets/p}, E: {from_env: MY}}"
    text = GOOD.replace("    context_length: 32768\n", f"    context_length: 32768\n    env: {env}\n")
    load_config(str(write_config(tmp_path, text)))


# -- plan-time checks ------------------------------------------------------------------------------
def config_with(env: str, router: str = "") -> str:
    return (
        "version: 1\nproject: lab\n"
        + router
        + f"models:\n  m:\n    source: {{path: /m/m}}\n    context_length: 4096\n    gpus: none\n    env: {env}\n"
        + "  n:\n    source: {path: /m/n}\n    context_length: 4096\n    gpus: none\n"
    )


def test_every_bad_reference_is_a_blocking_check(tmp_path, monkeypatch):
    monkeypatch.delenv("AIGO_UNIT_UNSET", raising=False)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to("/etc/shadow")
    env = f"{{A: {{from_env: AIGO_UNIT_UNSET}}, B: {{from_file: {fifo}}}, C: {{from_file: {link}}}}}"
    checks = reference_checks(desired(tmp_path, config_with(env)))
    assert [c.status for c in checks] == ["blocking"] * 3
    assert [c.id for c in checks] == ["secrets.reference"] * 3
    assert checks[0].message == "models.m.env.A: the environment variable AIGO_UNIT_UNSET is not set"
    assert checks[1].message.startswith("models.m.env.B: the secret file") and "FIFO" in checks[1].message
    assert "models.m.env.C:" in checks[2].message and "inside the system folder /etc" in checks[2].message
    assert reference_checks(desired(tmp_path, config_with(env)), frozenset({"n"})) == []


def test_good_references_and_router_keys_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("AIGO_UNIT_GOOD", "good-value-1")
    keys = secret_file(tmp_path, b"key-aaaa-1111\nkey-bbbb-2222\n", "keys")
    router = f"router: {{api_keys: {{from_file: {keys}}}}}\n"
    assert reference_checks(desired(tmp_path, config_with("{A: {from_env: AIGO_UNIT_GOOD}}", router))) == []
    router = "router: {api_keys: {from_env: AIGO_UNIT_UNSET_KEYS}}\n"
    checks = reference_checks(desired(tmp_path, config_with("{A: {from_env: AIGO_UNIT_GOOD}}", router)))
    assert [c.message for c in checks] == ["router.api_keys: the environment variable AIGO_UNIT_UNSET_KEYS is not set"]


# -- redaction: journal, reporters, the error boundary ---------------------------------------------
def test_resolved_values_are_redacted_everywhere(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AIGO_UNIT_R", 'red-"act-me-42')
    value = resolve(SecretRef("from_env", "AIGO_UNIT_R"), WHERE)
    assert redact(f"docker said: bad value {value}!") == "docker said: bad value ***!"
    journal = Journal(tmp_path)
    journal.record("create", "model.m", "failed", message=f"refused {value}")
    assert value not in journal.path.read_text() and "act-me" not in journal.path.read_text()
    stream = io.StringIO()
    JsonReporter(stream).event("step", address="model.m", message=f"x {value}", log_tail=[value])
    assert "act-me" not in stream.getvalue() and json.loads(stream.getvalue())["message"] == "x ***"
    TextReporter().say(f"oops {value}", err=True)
    TextReporter().event("waiting", address="model.m", elapsed=3.0, stage="loading", log=value * 40)
    out = capsys.readouterr()
    assert "act-me" not in out.out + out.err and "oops ***" in out.err


def test_the_error_boundary_redacts(monkeypatch, capsys):
    from aigo_apply.cli import main as cli_main
    from aigo_apply.errors import AigoError

    monkeypatch.setenv("AIGO_UNIT_B", "boundary-secret-77")
    value = resolve(SecretRef("from_env", "AIGO_UNIT_B"), WHERE)

    def boom(**_):
        raise AigoError(f"the daemon refused {value}")

    monkeypatch.setattr(cli_main.cli, "main", boom)
    with pytest.raises(SystemExit) as info:
        cli_main.main(["plan"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "boundary-secret" not in err and "the daemon refused ***" in err


def test_container_env_resolves_each_reference(monkeypatch, tmp_path):
    monkeypatch.setenv("AIGO_UNIT_GOOD", "good-value-1")
    d = desired(tmp_path, config_with("{A: {from_env: AIGO_UNIT_GOOD}, B: plain}"))
    env = container_env(d.models["m"].container, "m")
    assert env["A"] == "good-value-1" and env["B"] == "plain" and env["HF_HUB_OFFLINE"] == "1"
    assert "good-value-1" not in json.dumps(d.models["m"].container.labels)
    assert secrets.MAX_SECRET_BYTES == 64 * 1024


def test_a_label_never_stores_a_credential():
    from aigo_apply.desired import labels
    from aigo_apply.errors import UnsafeSetting

    with pytest.raises(UnsafeSetting, match="refusing to store a URL with a password in a container label") as info:
        labels.for_engine("lab", "m", "vllm", {"env": {"DB": "postgres://u:hunter22@db/x"}}, "sha256:x")
    assert "hunter22" not in str(info.value)
    spec = {"env": {"T": {"from_env": "T"}, "LOG": "debug"}, "port": 19000}
    assert json.loads(labels.for_engine("lab", "m", "vllm", spec, "sha256:x")[labels.SPEC]) == spec


def test_json_redaction_keeps_the_keys(monkeypatch):
    monkeypatch.setenv("AIGO_UNIT_K", "message")  # a secret that equals a key of the JSON lines
    resolve(SecretRef("from_env", "AIGO_UNIT_K"), WHERE)
    stream = io.StringIO()
    JsonReporter(stream).event("step", message="the message", n=3)
    line = json.loads(stream.getvalue())
    assert line["message"] == "the ***" and line["n"] == 3


def test_a_hard_link_is_refused(tmp_path):
    original = secret_file(tmp_path, b"linked-secret-1", "original")
    os.link(original, tmp_path / "second-name")
    assert "has other hard links" in refused(SecretRef("from_file", str(tmp_path / "second-name")))


def test_a_value_holding_the_hosts_token_is_refused(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "long-host-token-42")
    monkeypatch.setenv("WRAPPED", "Bearer long-host-token-42")
    assert "holds the Hugging Face token" in refused(SecretRef("from_env", "WRAPPED"))


@pytest.mark.parametrize(
    "router, expected",
    [
        ("{api_keys: {from_env: HF_TOKEN}}", "F:3:20: router.api_keys: HF_TOKEN holds the Hugging Face token"),
        ("{api_keys: {from_env: HF_API_KEY}}", "router.api_keys: HF_API_KEY holds the Hugging Face token"),
        ("{api_keys: {from_file: /etc/shadow}}", "router.api_keys: the secret file '/etc/shadow' is inside the system"),
    ],
)
def test_router_keys_get_the_same_reference_rules(tmp_path, router, expected):
    text = f"version: 1\nproject: lab\nrouter: {router}\nmodels: {{}}\n"
    assert expected in " | ".join(problems(tmp_path, text))


@pytest.mark.parametrize(
    "name, token", [("HF_TOKEN", True), ("HF_API_KEY", True), ("HF_TOKEN_PATH", False), ("HF_HUB_OFFLINE", False)]
)
def test_which_names_are_hub_tokens(name, token):
    from aigo_apply.config.env_rules import hub_token_name

    assert hub_token_name(name) is token
