"""Mounts and paths: only a model's own folder or file is ever mounted; system,
home, private and the tool's own folders are refused with the reason, at validation, again when the
desired state is built with the host's folders, and a last time by the Docker adapter (a symlink
swapped in since the plan, a missing path Docker would create, a ':' in a path). A missing or
wrong local source blocks the plan."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from aigo_apply.adapters.create_checks import check_mounts
from aigo_apply.config.env_rules import unsafe_secret_file
from aigo_apply.config.host_paths import Protected, path_text_problem, unsafe_mount
from aigo_apply.desired.build import build_desired
from aigo_apply.desired.types import ContainerSpec, Mount
from aigo_apply.errors import ConfigInvalid, UnsafeSetting
from aigo_apply.observe import host_paths
from aigo_apply.observe.config_file import load_config
from aigo_apply.observe.local_sources import local_source_problems
from aigo_apply.plan.host_checks import source_checks

from helpers.configs import host_context, model_folder, write_config

HOME = Path("/home/ada")


@pytest.fixture(autouse=True)
def no_other_homes(monkeypatch):
    """The policy is tested with the homes it is given (tests/unit/config/test_private_places.py), not
    with the accounts of the machine running the tests."""
    monkeypatch.setattr(host_paths, "known_homes", lambda: ())


PLACES = (
    Protected("the Hugging Face cache and its token", HOME / ".cache/huggingface"),
    Protected("aigo-apply's state folder", HOME / ".local/state/aigo-apply"),
    Protected("the whole model store", HOME / ".cache/aigo-apply/models", inside_too=False),
)


@pytest.mark.parametrize(
    "path, why",
    [
        ("/", "the whole filesystem"),
        ("/etc", "the system folder /etc"),
        ("/etc/ssl/private", "inside the system folder /etc"),
        ("/var", "the shared folder /var"),
        ("/var/lib", "the shared folder /var/lib"),
        ("/var/lib/docker/volumes/x", "inside the system folder /var/lib/docker"),
        ("/var/log", "the system folder /var/log"),
        ("/home", "the shared folder /home"),
        ("/tmp", "the shared folder /tmp"),
        ("/root", "the shared folder /root"),
        ("/home/ada", "your whole home folder"),
        ("/home/ada/.ssh", "the private folder ~/.ssh"),
        ("/home/ada/.config/gcloud", "the private folder ~/.config (or inside it)"),
        ("/home/ada/.cache", "a folder that holds the Hugging Face cache"),
        ("/home/ada/.cache/huggingface", "the Hugging Face cache and its token"),
        ("/home/ada/.cache/huggingface/hub/models--a--b/snapshots/c", "inside the Hugging Face cache"),
        ("/home/ada/.local/state/aigo-apply/p/router", "inside aigo-apply's state folder"),
        ("/home/ada/.cache/aigo-apply/models", "the whole model store"),
        ("/data", None),
        ("/home/ada/models/qwen", None),
        ("/srv/models/qwen", None),
        ("/x.gguf", None),  # a file at the top: only the file is mounted
        # where udisks mounts removable disks (Fedora, Arch): like /media, the rest of /run stays system
        ("/run/media/alice/usb/models/x", None),
        ("/run/media/alice/usb", None),
        ("/run/media/alice", "the shared folder /run/media/alice"),
        ("/run/media", "the shared folder /run/media"),
        ("/run", "the system folder /run"),
        ("/run/secrets/hf", "inside the system folder /run"),
        ("/run/docker.sock", "inside the system folder /run"),
        ("/run/user/1000/models", "inside the system folder /run"),
        ("/run/mediaX/alice/usb", "inside the system folder /run"),
        ("/run/media/alice/usb/.ssh", "the private folder /run/media/alice/usb/.ssh"),
        ("/home/ada/.cache/aigo-apply/models/Qwen--Qwen3/main", None),
    ],
)
def test_the_mount_policy_names_why_a_folder_is_refused(path, why):
    found = unsafe_mount(Path(path), HOME, PLACES)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_a_model_on_a_removable_disk_validates(tmp_path):
    load_config(str(_config(tmp_path, "/run/media/alice/usb/models/x")))
    with pytest.raises(ConfigInvalid) as caught:
        load_config(str(_config(tmp_path, "/run/secrets/models/x")))
    assert "is inside the system folder /run" in "\n".join(caught.value.lines())
    assert unsafe_secret_file(Path("/run/media/alice/usb/keys/openai"), HOME) is None
    assert unsafe_secret_file(Path("/run/secrets/openai"), HOME) == "inside the system folder /run"


def test_the_model_store_may_be_a_shared_folder_but_not_a_private_one():
    assert unsafe_mount(Path("/srv"), HOME, PLACES[:2], store=True) is None
    assert unsafe_mount(HOME, HOME, PLACES[:2], store=True) is None
    assert "system folder" in str(unsafe_mount(Path("/etc/models"), HOME, PLACES[:2], store=True))
    assert "private" in str(unsafe_mount(HOME / ".ssh", HOME, PLACES[:2], store=True))


@pytest.mark.parametrize("text", ["/a:b", "/a,b", "/a\nb", "/a\x00b", "/a\x7fb", "/a\x85b"])
def test_a_path_docker_would_split_or_misread_is_refused(text):
    assert path_text_problem(text)


def _config(tmp_path: Path, source: str, engine: str = "vllm") -> Path:
    tag = "\nengines: {llama.cpp: {image_tag: server-cuda}}" if engine == "llama.cpp" else ""
    return write_config(
        tmp_path,
        f"version: 1\nproject: mnt{tag}\nmodels:\n  a: {{engine: {engine}, source: {{path: {source}}}, "
        "context_length: 4096, gpus: none}\n",
    )


@pytest.mark.parametrize(
    "source, message",
    [
        ("/", "is the whole filesystem"),
        ("/var", "is the shared folder /var"),
        ("/home", "is the shared folder /home"),
        ("'~'", "is your whole home folder"),
        ("~/.ssh", "is the private folder ~/.ssh"),
        ("/etc/../etc", "is the system folder /etc"),
        ("'/models/a:b'", "holds ':' (Docker's mount syntax splits on it)"),
        ('"/models/a\\tb"', "must be a path without control characters"),
    ],
)
def test_validation_refuses_unsafe_mounts_where_they_are_written(tmp_path, source, message):
    with pytest.raises(ConfigInvalid) as caught:
        load_config(str(_config(tmp_path, source)))
    text = "\n".join(caught.value.lines())
    assert ":4:" in text and "models.a.source.path" in text and message in text, text


def test_the_host_context_refuses_the_tools_own_folders_when_the_state_is_built(tmp_path):
    host = replace(host_context(tmp_path / "store"), state_root=tmp_path / "state", hf_home=tmp_path / "hf")
    for folder, why in [
        ("state/p", "inside aigo-apply's state folder"),
        ("hf", "the Hugging Face cache and its token"),
        ("store", "the whole model store"),
    ]:
        model_folder(tmp_path / folder)
        with pytest.raises(UnsafeSetting, match=why) as caught:
            build_desired(load_config(str(_config(tmp_path, folder))), host)
        assert "models.a.source.path" in str(caught.value)


def test_a_models_dir_inside_the_state_folder_is_refused(tmp_path):
    host = replace(host_context(), state_root=tmp_path / "state")
    path = write_config(
        tmp_path,
        f"version: 1\nproject: mnt\ndefaults: {{models_dir: {tmp_path / 'state' / 'models'}}}\nmodels: {{}}\n",
    )
    with pytest.raises(UnsafeSetting, match="defaults.models_dir: .* inside aigo-apply's state folder"):
        build_desired(load_config(str(path)), host)


@pytest.mark.parametrize("where", ["/x.gguf", "~/m.gguf"])
def test_a_gguf_file_is_mounted_alone_never_its_folder(tmp_path, where):
    desired = build_desired(load_config(str(_config(tmp_path, where, "llama.cpp"))), host_context())
    file = Path(where).expanduser()
    model = desired.models["a"]
    assert [(m.source, m.target) for m in model.container.mounts] == [(str(file), f"/models/a/{file.name}")]
    assert model.container.command[:2] == ("--model", f"/models/a/{file.name}")


def test_every_part_of_a_split_gguf_file_is_mounted_and_nothing_else(tmp_path):
    desired = build_desired(load_config(str(_config(tmp_path, "g/q-00001-of-00003.gguf", "llama.cpp"))), host_context())
    mounts = desired.models["a"].container.mounts
    assert [m.target for m in mounts] == [f"/models/a/q-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert all(m.read_only and m.source.startswith(str(tmp_path / "g") + "/") for m in mounts)


def _spec(*mounts: Mount) -> ContainerSpec:
    return ContainerSpec(
        name="aigo-mnt-a",
        image="img",
        command=(),
        env=(),
        mounts=mounts,
        host_ip="127.0.0.1",
        host_port=1,
        container_port=8000,
        gpus="none",
    )


def test_the_adapter_refuses_a_folder_swapped_for_a_symlink_after_planning(tmp_path):
    folder = model_folder(tmp_path / "m")
    spec = _spec(Mount(str(folder), "/models/a", True), Mount("aigo-mnt-cache", "/root/.cache", False))
    check_mounts(spec)  # as planned: fine
    os.rename(folder, tmp_path / "elsewhere")
    os.symlink("/etc", folder)
    with pytest.raises(UnsafeSetting, match="now leads to /etc"):
        check_mounts(spec)


@pytest.mark.parametrize(
    "source, message",
    [
        ("missing", "does not exist (Docker would create an empty folder"),
        ("a:b", "holds ':'"),
        ("../x", "neither an absolute path nor a volume name"),
    ],
)
def test_the_adapter_refuses_what_docker_would_misread_or_create(tmp_path, source, message):
    path = source if source.startswith("..") else str(tmp_path / source)
    with pytest.raises(UnsafeSetting, match="refusing to mount") as caught:
        check_mounts(_spec(Mount(path, "/models/a", True)))
    assert message in str(caught.value)


def test_the_adapter_refuses_a_system_folder_even_when_the_plan_was_bypassed():
    with pytest.raises(UnsafeSetting, match="the system folder /etc"):
        check_mounts(_spec(Mount("/etc", "/models/a", True)))
    with pytest.raises(UnsafeSetting, match="the system folder /etc"):  # a LoRA adapter's mount too
        check_mounts(_spec(Mount("/etc", "/adapters/sql", True)))


def test_a_missing_or_wrong_local_source_blocks_the_plan(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    good = model_folder(tmp_path / "good")
    (tmp_path / "g.gguf").write_bytes(b"GGUF")
    os.symlink(tmp_path / "g.gguf", tmp_path / "link.gguf")
    specs = {
        "missing": {"source": {"path": str(tmp_path / "nope")}, "model_dir": str(tmp_path / "nope")},
        "empty": {"source": {"path": str(tmp_path / "empty")}, "model_dir": str(tmp_path / "empty")},
        "file": {"source": {"path": str(tmp_path / "file")}, "model_dir": str(tmp_path / "file")},
        "good": {"source": {"path": str(good)}, "model_dir": str(good)},
        "gguf": {"source": {"path": "x"}, "model_dir": str(tmp_path), "model_file": "g.gguf"},
        "link": {"source": {"path": "x"}, "model_dir": str(tmp_path), "model_file": "link.gguf"},
        "split": {"source": {"path": "x"}, "model_dir": str(tmp_path), "model_file": "s-00001-of-00002.gguf"},
        "repo": {"source": {"repo": "a/b"}, "model_dir": str(tmp_path / "nope")},  # downloads are planned instead
    }
    problems = local_source_problems(specs)
    assert sorted(problems) == ["empty", "file", "link", "missing", "split"]
    assert "does not exist" in problems["missing"][0] and "holds no config.json" in problems["empty"][0]
    assert "is a file" in problems["file"][0] and "is a symlink" in problems["link"][0]
    assert len(problems["split"]) == 2
    checks = source_checks(problems)
    assert {c.id for c in checks} == {"model.path"} and all(c.status == "blocking" for c in checks)


# -- pure functions of data: the host's facts come in, nothing is read ------------------
def _count_reads(monkeypatch) -> list[str]:
    """Each call of what resolves a path, finds a home or lists the accounts, while it is patched."""
    calls: list[str] = []
    for owner, name in [(Path, "resolve"), (Path, "home"), (Path, "expanduser"), (os, "scandir")]:
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    monkeypatch.setattr(host_paths.pwd, "getpwall", lambda: calls.append("getpwall") or [])
    return calls


def test_validation_judges_the_paths_by_the_facts_it_is_given(monkeypatch):
    from aigo_apply.config import rules
    from aigo_apply.config.path_facts import HostPaths
    from aigo_apply.config.yaml_source import load_text

    text = "version: 1\nproject: mnt\nmodels:\n  a: {source: {path: m}, context_length: 4096, gpus: none}\n"
    source = load_text(text, "/nowhere/aigo.yaml")
    facts = HostPaths(HOME, HOME, (), (), {Path("/nowhere/m"): Path("/etc/ssl")}, {}, Path("/nowhere"))
    reads = _count_reads(monkeypatch)
    problems = rules.check(source, facts)
    monkeypatch.undo()
    assert reads == []
    assert [p.message for p in problems if p.path == "models.a.source.path"] == [
        "'m' is inside the system folder /etc (/etc/ssl); engines get this mounted, so it must be the model's "
        "(or adapter's) own folder or file: point it there"
    ]


def test_the_desired_state_takes_where_each_path_leads_from_the_facts(monkeypatch):
    from aigo_apply.config.load import Config
    from aigo_apply.config.path_facts import HostPaths
    from aigo_apply.config.yaml_source import load_text
    from aigo_apply.desired.types import HostContext

    text = "version: 1\nproject: mnt\nmodels:\n  a: {source: {path: ~/m}, context_length: 4096, gpus: none}\n"
    source = load_text(text, "/nowhere/aigo.yaml")
    leads = {HOME / "m": Path("/data/models/m"), Path("/store"): Path("/store")}
    config = Config("/nowhere/aigo.yaml", Path("/nowhere"), source.data, source.marks, HostPaths(HOME, HOME))
    host = HostContext(
        1000,
        1000,
        HOME,
        Path("/state"),
        Path("/store"),
        paths=HostPaths(HOME, HOME, (), (), leads, {Path("/store"): None}),
    )
    reads = _count_reads(monkeypatch)
    desired = build_desired(config, host)
    monkeypatch.undo()
    assert reads == []
    assert desired.models["a"].spec["source"] == {"path": "/data/models/m"}
    elsewhere = replace(host, paths=replace(host.paths, writers={Path("/store"): "a folder another account owns"}))
    with pytest.raises(UnsafeSetting, match="defaults.models_dir: /store is a folder another account owns"):
        build_desired(config, elsewhere)
