"""Private places (hardening): one policy for model mounts and `from_file` secrets. A credential
folder or file (PRIVATE_NAMES) is refused wherever it is in the path, in any home or a backup of
one; every home folder the system knows is private as a whole (a model folder inside one may be
mounted, yours or, as root, another account's; a secret is read from your own home only); the
tool's state folder, the Hugging Face cache and the model store are protected for secrets as for
mounts. The homes come from `homes=` or a patched `known_homes`: no test reads /etc/passwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aigo_apply.adapters.create_checks import check_mounts
from aigo_apply.config.env_rules import unsafe_secret_file
from aigo_apply.config.host_paths import PRIVATE_NAMES, Protected, unsafe_mount
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import ContainerSpec, Mount, SecretRef
from aigo_apply.errors import ConfigInvalid, SecretUnavailable, UnsafeSetting
from aigo_apply.observe import host_paths
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.host_paths import known_homes, usable_homes
from aigo_apply.platforms import secrets
from aigo_apply.platforms.secrets import resolve

from helpers.configs import host_context, model_folder, regathered, write_config

ADA = Path("/home/ada")  # you
HOMES = (ADA, Path("/home/alice"), Path("/home/bob"), Path("/root"), Path("/var/lib/someuser-home"))
PLACES = (
    Protected("the Hugging Face cache and its token", ADA / ".cache/huggingface"),
    Protected("aigo-apply's state folder", ADA / ".local/state/aigo-apply"),
    Protected("the whole model store", ADA / ".cache/aigo-apply/models", inside_too=False),
)


def mount_why(path: str, home: Path = ADA) -> str | None:
    return unsafe_mount(Path(path), home, PLACES, homes=HOMES)


def secret_why(path: str, home: Path = ADA) -> str | None:
    return unsafe_secret_file(Path(path), home, (), PLACES, homes=HOMES)


# -- the one list, at any depth, in any home ------------------------------------------------------
@pytest.mark.parametrize("name", PRIVATE_NAMES)
@pytest.mark.parametrize(
    "where", ["/home/alice", "/home/ada", "/root", "/var/lib/someuser-home", "/data/backup", "/srv/x/y/home/bob"]
)
def test_every_private_name_is_refused_for_mounts_and_secrets_anywhere(name, where):
    for path in (f"{where}/{name}", f"{where}/{name}/inside/model.gguf"):
        assert mount_why(path), path
        assert secret_why(path), path


@pytest.mark.parametrize(
    "path, why",
    [
        ("/home/alice/.docker", "the private folder /home/alice/.docker"),
        ("/home/bob/.ssh/id.gguf", "the private folder /home/bob/.ssh (or inside it)"),
        ("/root/.docker", "the private folder /root/.docker"),
        ("/var/lib/someuser-home/.aws", "the private folder /var/lib/someuser-home/.aws"),
        ("/data/backup/.ssh/keys", "the private folder /data/backup/.ssh (or inside it)"),
        ("/data/backup/home/ada/.kube/cache", "the private folder /data/backup/home/ada/.kube (or inside it)"),
        ("/home/ada/backup/.gnupg", "the private folder ~/backup/.gnupg"),
        ("/home/alice/.cache/huggingface/hub/models--a--b/snapshots/c", "/home/alice/.cache/huggingface"),
        ("/home/alice/.local/state/aigo-apply/p/router", "the private folder /home/alice/.local/state"),
        ("/home/alice/.SSH", "the private folder /home/alice/.SSH"),  # a case-insensitive filesystem
        ("/home/alice", "the home folder /home/alice of another account"),
        ("/var/lib/someuser-home", "the home folder /var/lib/someuser-home of another account"),
        ("/home/ada/.aigo/secrets", "the secrets folder /home/ada/.aigo/secrets"),
        ("/home/alice/.aigo/secrets/x", "the secrets folder /home/alice/.aigo/secrets"),
        ("/var/lib", "the shared folder /var/lib"),
        ("/home/ada", "your whole home folder"),
        # allowed: a model folder inside a home, yours or (as root, say) another account's
        ("/home/ada/models/qwen", None),
        ("/home/alice/models/qwen", None),
        ("/root/models/qwen", None),
        ("/home/alice/.ollama/models/q.gguf", None),
        ("/data/models/qwen", None),
    ],
)
def test_mounts_in_any_home(path, why):
    found = mount_why(path)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_a_folder_that_holds_any_home_is_refused():
    homes = (*HOMES, Path("/data/users/alice"))
    for folder in ("/data/users", "/data"):
        assert "holds home folders (/data/users/alice" in str(unsafe_mount(Path(folder), ADA, PLACES, homes=homes))
    # the model store is never mounted itself: a home (or what holds one) may hold it
    assert unsafe_mount(Path("/data/users"), ADA, PLACES[:2], store=True, homes=homes) is None
    assert unsafe_mount(Path("/home/alice"), ADA, PLACES[:2], store=True, homes=homes) is None
    assert "private" in str(unsafe_mount(Path("/home/alice/.aws"), ADA, PLACES[:2], store=True, homes=homes))


def test_root_may_mount_a_model_folder_in_another_home_but_never_its_secrets():
    root = Path("/root")
    assert unsafe_mount(Path("/home/alice/models/qwen"), root, homes=HOMES) is None
    assert "the home folder /home/alice of another account" in str(unsafe_mount(Path("/home/alice"), root, homes=HOMES))
    assert unsafe_mount(Path("/home/alice/.cache/huggingface/token"), root, homes=HOMES)
    assert unsafe_secret_file(Path("/home/alice/.cache/huggingface/token"), root, homes=HOMES)


@pytest.mark.parametrize(
    "path, why",
    [
        ("/home/alice/.cache/huggingface/token", "the Hugging Face token file"),
        ("/srv/hf/huggingface/stored_tokens", "the Hugging Face token file"),
        ("/home/alice/.docker/config.json", "inside the private folder /home/alice/.docker"),
        ("/home/bob/.ssh/id_rsa", "inside the private folder /home/bob/.ssh"),
        ("/root/.docker/config.json", "inside the private folder /root/.docker"),
        ("/var/lib/someuser-home/.aws/credentials", "inside the private folder /var/lib/someuser-home/.aws"),
        ("/data/backup/.ssh/id_ed25519", "inside the private folder /data/backup/.ssh"),
        ("/srv/old/home/bob/.netrc", "the private file /srv/old/home/bob/.netrc"),
        ("/home/alice/api-key.txt", "inside the home folder /home/alice of another account"),
        ("/root/api-key", "inside the home folder /root of another account"),
        ("/var/lib/someuser-home/key", "inside the system folder /var/lib"),
        ("/home/ada/.local/state/aigo-apply/other/router/live/api-keys", "inside aigo-apply's state folder"),
        ("/home/ada/.cache/huggingface/hub/x", "inside the Hugging Face cache"),
        ("/home/ada/.cache/aigo-apply/models/a--b/main/config.json", "inside the whole model store"),
        # allowed: your own home's secret files, and files outside every home
        ("/home/ada/.aigo/secrets/api-key", None),
        ("/home/ada/keys/api", None),
        ("/srv/secrets/api", None),
    ],
)
def test_secret_files_in_any_home(path, why):
    found = secret_why(path)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_as_root_your_own_secrets_are_read_and_other_homes_are_not():
    root = Path("/root")
    assert unsafe_secret_file(Path("/root/.aigo/secrets/key"), root, homes=HOMES) is None
    assert "another account" in str(unsafe_secret_file(Path("/home/alice/.aigo/secrets/key"), root, homes=HOMES))


def test_the_homes_the_system_lists_are_filtered_and_resolved(tmp_path):
    (tmp_path / "real-alice").mkdir()
    (tmp_path / "alice").symlink_to(tmp_path / "real-alice")
    found = usable_homes(["/", "/bin", "/dev/null", "/usr/sbin", "/run/ircd", "/tmp", "/var", "relative",
                          "/root", "/var/lib/postgresql", "/home/x/", str(tmp_path / "alice")])  # fmt: skip
    assert set(found) == {
        Path("/root"),
        Path("/var/lib/postgresql"),
        Path("/home/x"),
        tmp_path / "alice",
        tmp_path / "real-alice",
    }


def test_known_homes_reads_the_password_database_root_and_home(monkeypatch):
    class Entry:
        def __init__(self, home: str):
            self.pw_dir = home

    monkeypatch.setattr(host_paths.pwd, "getpwall", lambda: [Entry("/"), Entry("/srv/svc-home"), Entry("/bin")])
    known_homes.cache_clear()
    try:
        found = known_homes()
    finally:
        known_homes.cache_clear()
    assert Path("/srv/svc-home") in found and Path("/root") in found
    assert Path("/") not in found and Path("/bin") not in found
    if os.path.isdir("/home"):
        assert {Path(e.path) for e in os.scandir("/home")} <= set(found)


# -- the same policy where it is used: validation, desired state, adapter, secret reader -------------
@pytest.fixture
def homes(tmp_path, monkeypatch):
    """A machine with your home (ada) and two other accounts' homes, all in tmp_path."""
    root = tmp_path / "machine"
    places = {name: root / "home" / name for name in ("ada", "alice", "bob")}
    for home in places.values():
        home.mkdir(parents=True)
    monkeypatch.setattr(host_paths, "known_homes", lambda: tuple(places.values()))
    monkeypatch.setenv("HOME", str(places["ada"]))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("AIGO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in [n for n in os.environ if "TOKEN" in n.upper()]:
        monkeypatch.delenv(name)
    yield places
    secrets._known.clear()


def _config(tmp_path: Path, source: str, env: str = "") -> Path:
    env_line = f", env: {{S: {{from_file: {env}}}}}" if env else ""
    return write_config(
        tmp_path,
        f"version: 1\nproject: priv\nmodels:\n  a: {{source: {{path: '{source}'}}, context_length: 4096, "
        f"gpus: none{env_line}}}\n",
    )


@pytest.mark.parametrize(
    "where, why",
    [
        ("alice", "the home folder"),
        ("alice/.docker", "the private folder"),
        ("bob/.cache/huggingface", "the private folder"),
        ("bob/backup/.ssh/id.gguf", "the private folder"),
        ("alice/.aigo/secrets", "the secrets folder"),
    ],
)
def test_validation_refuses_other_homes_private_places_where_written(tmp_path, homes, where, why):
    target = homes["ada"].parent / where
    model_folder(target) if not where.endswith(".gguf") else None
    with pytest.raises(ConfigInvalid) as caught:
        load_config(str(_config(tmp_path, str(target))))
    text = "\n".join(caught.value.lines())
    assert ":4:" in text and "models.a.source.path" in text and why in text, text


def test_a_model_folder_in_another_home_is_mounted_for_root(tmp_path, homes):
    folder = model_folder(homes["alice"] / "models" / "qwen")
    host = host_context(tmp_path / "store", home=homes["ada"].parent.parent / "root", hf_home=tmp_path / "hf")
    desired = build_desired(load_config(str(_config(tmp_path, str(folder)))), host)
    assert [m.source for m in desired.models["a"].container.mounts if m.target.startswith("/models")] == [str(folder)]


def test_the_desired_state_refuses_another_homes_credentials_even_past_validation(tmp_path, homes):
    folder = model_folder(homes["alice"] / "models" / "qwen")
    config = load_config(str(_config(tmp_path, str(homes["alice"] / "m"))))  # valid when it was read
    (homes["alice"] / "m").symlink_to(homes["alice"] / ".docker", target_is_directory=True)
    (homes["alice"] / ".docker").mkdir()
    with pytest.raises(UnsafeSetting, match=r"models\.a\.source\.path: .* the private folder .*\.docker"):
        build_desired(regathered(config), host_context(tmp_path / "store", home=homes["ada"], hf_home=tmp_path / "hf"))
    assert folder.is_dir()


def test_the_adapter_refuses_another_homes_private_folder_when_the_plan_was_bypassed(homes):
    docker = homes["bob"] / ".docker"
    docker.mkdir()
    spec = ContainerSpec(
        name="aigo-priv-a",
        image="img",
        command=(),
        env=(),
        mounts=(Mount(str(docker), "/models/a", True),),
        host_ip="127.0.0.1",
        host_port=1,
        container_port=8000,
        gpus="none",
    )
    with pytest.raises(UnsafeSetting, match="refusing to mount .* the private folder"):
        check_mounts(spec)


def _refused(target: str) -> str:
    with pytest.raises(SecretUnavailable) as caught:
        resolve(SecretRef("from_file", target), "models.a.env.S")
    return str(caught.value)


def test_secret_files_in_other_homes_are_refused_and_yours_are_read(tmp_path, homes):
    mine = homes["ada"] / ".aigo" / "secrets" / "key"
    mine.parent.mkdir(parents=True)
    mine.write_text("my-own-value\n")
    assert resolve(SecretRef("from_file", str(mine)), "models.a.env.S") == "my-own-value"
    theirs = homes["alice"] / "api-key"
    theirs.write_text("alice-value\n")
    assert "inside the home folder" in _refused(str(theirs)) and "of another account" in _refused(str(theirs))
    token = homes["bob"] / ".cache" / "huggingface" / "token"
    token.parent.mkdir(parents=True)
    token.write_text("hub-value\n")
    assert "the Hugging Face token file" in _refused(str(token))
    link = tmp_path / "innocent"
    link.symlink_to(theirs)
    assert f"(a link to {theirs})" in _refused(str(link))


def test_the_tools_own_folders_are_refused_as_secret_files(tmp_path, homes):
    keys = tmp_path / "state" / "other-project" / "router" / "live" / "api-keys"
    keys.parent.mkdir(parents=True)
    keys.write_text("other-projects-key\n")
    assert "inside aigo-apply's state folder" in _refused(str(keys))
    link = tmp_path / "looks-fine"
    link.symlink_to(keys)
    assert "inside aigo-apply's state folder" in _refused(str(link))
    cached = tmp_path / "hf-home" / "hub" / "some-file"
    cached.parent.mkdir(parents=True)
    cached.write_text("x-value-12345\n")
    assert "inside the Hugging Face cache" in _refused(str(cached))
    stored = tmp_path / "cache" / "aigo-apply" / "models" / "a--b" / "main" / "config.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("{}\n")
    assert "inside the whole model store" in _refused(str(stored))


def test_validation_refuses_secret_files_in_other_homes_and_the_state_folder(tmp_path, homes):
    folder = model_folder(tmp_path / "m")
    for target, why in [
        (homes["alice"] / "key", "of another account"),
        (homes["bob"] / ".kube" / "config", "inside the private folder"),
        (tmp_path / "state" / "p" / "router" / "live" / "api-keys", "inside aigo-apply's state folder"),
    ]:
        with pytest.raises(ConfigInvalid) as caught:
            load_config(str(_config(tmp_path, str(folder), str(target))))
        text = "\n".join(caught.value.lines())
        assert ":4:" in text and "models.a.env.S" in text and why in text, text
