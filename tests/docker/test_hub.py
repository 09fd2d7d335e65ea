"""Models from Hugging Face, end to end: the real huggingface_hub client downloads from a local
stand-in for the Hub (tests/helpers/hub.py, HF_ENDPOINT on 127.0.0.1) into the model store on the
host, and the stub engine container gets the folder read-only, offline, with no token anywhere."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from safetensors.numpy import save

from aigo_apply.desired import labels

from helpers.cli import run_cli
from helpers.configs import free_port, router_yaml, write_config
from helpers.hub import Hub

CONFIG = json.dumps({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}).encode()


def tiny_files(seed: int = 1) -> dict[str, bytes]:
    """A repo as the Hub holds it: real safetensors weights over 10 MiB (huggingface_hub's chunk size,
    so a cut connection leaves a partial file to resume), config, tokenizer, and files an engine
    never reads. `seed` makes commits differ."""
    weights = save({"model.embed_tokens.weight": np.full((3_000_000,), seed, dtype=np.float32)}, {"format": "pt"})
    return {
        "config.json": CONFIG,
        "model.safetensors": weights,
        "tokenizer.json": b"{}",
        "tokenizer_config.json": b"{}",
        "README.md": b"# tiny",
        "original/consolidated.pth": b"x" * 1000,
    }


@pytest.fixture
def hub():
    with Hub() as server:
        yield server


@pytest.fixture
def env(tmp_path, hub):
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(tmp_path / "hf-home"),
        "AIGO_STATE_DIR": str(tmp_path / "state"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_TOKEN": "",
    }


def config(tmp_path, project, source: str, router_port: int) -> str:
    return str(
        write_config(
            tmp_path,
            textwrap.dedent(f"""
        version: 1
        project: {project}
        engines: {{vllm: {{image: aigo-stub-engine, image_tag: "1"}}}}
        {router_yaml(router_port)}
        defaults: {{models_dir: store, ready_timeout: 60}}
        models:
          tiny:
            source: {source}
            context_length: 4096
            gpus: none
            env: {{AIGO_STUB_LOAD_SECONDS: "0.2"}}
        """),
        )
    )


def test_apply_downloads_on_the_host_and_the_engine_runs_offline_without_a_token(runtime, project, tmp_path, hub, env):
    commit = hub.add("org/tiny", tiny_files())
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    planned = run_cli("plan", "-f", path, env=env)
    assert f"org/tiny@main is not on this machine: 4 files, 12.0 MB, commit {commit[:12]}" in planned.stdout
    result = run_cli("apply", "-f", path, "-y", env={**env, "HF_TOKEN": "hf_never_shown"})
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "store" / "org--tiny" / "main"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]  # no README, no original/
    inspected = runtime.api.inspect_container(f"aigo-{project}-tiny")
    sockets = tmp_path / "state" / project / "sockets" / "tiny"
    assert sorted((m["Source"], m["Destination"], m["RW"]) for m in inspected["Mounts"] if m["Type"] == "bind") == [
        (str(sockets), "/run/aigo", True),  # its socket's folder: the only host folder it may write
        (str(folder), "/models/tiny", False),
    ]  # (sorted: Docker lists a container's mounts in no fixed order)
    assert "HF_HUB_OFFLINE=1" in inspected["Config"]["Env"]
    assert not [e for e in inspected["Config"]["Env"] if e.startswith(("HF_TOKEN", "HUGGING_FACE"))]
    everything = json.dumps(inspected) + result.stdout + result.stderr + planned.stdout
    assert "hf_never_shown" not in everything
    assert json.loads(inspected["Config"]["Labels"][labels.SPEC])["source"] == {"repo": "org/tiny", "revision": "main"}

    hub.requests.clear()
    again = run_cli("apply", "-f", path, "-y", env=env)
    assert again.returncode == 0 and "No changes." in again.stdout
    # a second apply downloads nothing; it only asks where `main` points now, to report drift from aigo.lock
    assert hub.file_gets() == [] and [p for _, p, _ in hub.requests] == ["/api/models/org/tiny/revision/main"]
    lock = json.loads((tmp_path / "aigo.lock").read_text())
    assert lock["models"] == {"org/tiny@main": {"commit": commit, "models": ["tiny"]}}
    assert lock["images"]["aigo-stub-engine:1"]["id"].startswith("sha256:")
    listed = json.loads(run_cli("models", "list", "-f", path, "-o", "json", env=env).stdout)["models"]
    assert [(r["repo"], r["revision"], r["commit"], r["files"], r["used_by"]) for r in listed] == [
        ("org/tiny", "main", commit, 4, ["tiny"])
    ]


def test_models_pull_resumes_a_cut_download_and_a_second_pull_fetches_nothing(tmp_path, hub, env, project):
    hub.add("org/tiny", tiny_files())
    hub.cut_once["model.safetensors"] = 11_000_000
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    result = run_cli("models", "pull", "-f", path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    ranges = [r for _, r in hub.file_gets("model.safetensors")]
    assert ranges[0] is None and ranges[1].startswith("bytes=") and int(ranges[1][6:-1]) > 0  # resumed, not restarted
    folder = tmp_path / "store" / "org--tiny" / "main"
    assert (folder / "model.safetensors").read_bytes() == tiny_files()["model.safetensors"]
    from aigo_apply.observe.model_files import model_facts

    assert model_facts({"model_dir": str(folder)})["weights"] == 12_000_000  # a real checkpoint: its header reads
    hub.requests.clear()
    again = run_cli("models", "pull", "-f", path, env=env)
    assert again.returncode == 0 and "already on this machine" in again.stdout and hub.file_gets() == []


def test_a_pinned_commit_stays_put_when_the_branch_moves(tmp_path, hub, env, project):
    first = hub.add("org/tiny", tiny_files(1))
    hub.add("org/tiny", tiny_files(2))  # main moves on
    path = config(tmp_path, project, f"{{repo: org/tiny, revision: {first}}}", free_port())
    assert run_cli("models", "pull", "-f", path, env=env).returncode == 0
    folder = tmp_path / "store" / "org--tiny" / first
    assert (folder / "model.safetensors").read_bytes() == tiny_files(1)["model.safetensors"]
    assert json.loads((folder / ".aigo-download.json").read_text())["commit"] == first


def test_a_gated_repo_blocks_the_plan_with_the_fix_and_a_token_opens_it(runtime, project, tmp_path, hub, env):
    hub.add("org/gated", tiny_files(), gated_token="hf_granted")
    path = config(tmp_path, project, "{repo: org/gated}", free_port())
    blocked = run_cli("plan", "-f", path, env=env)
    assert blocked.returncode == 1
    assert "x hub.access: org/gated@main: the repo is gated and this machine's token has no access" in blocked.stdout
    assert (
        f"fix: request access on {hub.endpoint}/org/gated, then make a token available on this host: "
        "export HF_TOKEN=hf_... or `hf auth login`" in blocked.stdout
    )
    refused = run_cli("apply", "-f", path, "-y", env=env)
    assert refused.returncode == 1 and not runtime.api.containers(all=True, filters=labels.project_filter(project))
    wrong = run_cli("models", "pull", "-f", path, env={**env, "HF_TOKEN": "hf_wrong"})
    assert wrong.returncode == 1 and "the repo is gated" in wrong.stderr and "hf_wrong" not in wrong.stderr
    assert run_cli("models", "pull", "-f", path, env={**env, "HF_TOKEN": "hf_granted"}).returncode == 0


def test_a_repo_without_weights_is_refused_with_what_was_found(tmp_path, hub, env, project):
    hub.add("org/docs", {"README.md": b"hi", "notes.txt": b"x"})
    path = config(tmp_path, project, "{repo: org/docs}", free_port())
    result = run_cli("models", "pull", "-f", path, env=env)
    assert result.returncode == 1
    assert (
        "org/docs is not a model vLLM or SGLang can serve: it needs config.json and .safetensors (or .bin) "
        "weights at its top level; found README.md, notes.txt" in result.stderr
    )


def test_lock_records_the_commit_plan_reports_a_moved_branch_and_locked_apply_installs_the_recorded_one(
    runtime, project, tmp_path, hub, env
):
    first = hub.add("org/tiny", tiny_files(1))
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    assert run_cli("apply", "-f", path, "-y", env=env).returncode == 0
    lock_text = (tmp_path / "aigo.lock").read_text()
    assert json.loads(lock_text)["models"]["org/tiny@main"]["commit"] == first

    moved = hub.add("org/tiny", tiny_files(2))  # someone pushes to main
    planned = run_cli("plan", "-f", path, env=env)
    assert (
        f"aigo.lock: org/tiny@main now points to commit {moved[:12]} on the Hub; aigo.lock records {first[:12]}"
    ) in planned.stdout

    # a fresh machine set up from the config repo: nothing downloaded, no containers
    runtime.api.remove_container(f"aigo-{project}-tiny", force=True)
    import shutil

    shutil.rmtree(tmp_path / "store")
    hub.requests.clear()
    locked = run_cli("apply", "-f", path, "-y", "--locked", env=env)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    folder = tmp_path / "store" / "org--tiny" / "main"
    assert (folder / "model.safetensors").read_bytes() == tiny_files(1)["model.safetensors"]  # the recorded commit
    assert all(f"/resolve/{first}/" in p for p, _ in hub.file_gets())
    assert (tmp_path / "aigo.lock").read_text() == lock_text  # nothing new to record

    # the config repo's lock moves on (recorded elsewhere): a locked apply swaps the folder to that
    # commit whole and replaces the engine that used the old files
    old_id = runtime.api.inspect_container(f"aigo-{project}-tiny")["Id"]
    (tmp_path / "aigo.lock").write_text(lock_text.replace(first, moved))
    planned = run_cli("plan", "-f", path, env=env)
    assert f"org/tiny@main on this machine is commit {first[:12]}, aigo.lock records {moved[:12]}" in planned.stdout
    relocked = run_cli("apply", "-f", path, "-y", "--locked", env=env)
    assert relocked.returncode == 0, relocked.stdout + relocked.stderr
    assert f"(because its model files move to commit {moved[:12]} (aigo.lock))" in relocked.stdout
    assert (folder / "model.safetensors").read_bytes() == tiny_files(2)["model.safetensors"]
    assert json.loads((folder / ".aigo-download.json").read_text())["commit"] == moved
    assert not list(folder.parent.glob("*main.*"))  # no staging or old folder left behind
    assert runtime.api.inspect_container(f"aigo-{project}-tiny")["Id"] != old_id


def adapter_files(seed: int = 1) -> dict[str, bytes]:
    """A LoRA adapter's repo as the Hub holds it: its config and weights, and files vLLM never reads."""
    config = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": "org/tiny"}
    weights = save({"base_model.model.lora_A.weight": np.full((8, 64), seed, dtype=np.float32)}, {"format": "pt"})
    return {
        "adapter_config.json": json.dumps(config).encode(),
        "adapter_model.safetensors": weights,
        "README.md": b"# a tiny adapter",
        "training_args.bin": b"x" * 100,
        "checkpoint-10/adapter_model.safetensors": weights,
    }


def test_a_repo_adapter_is_downloaded_on_the_host_recorded_in_the_lock_and_reinstalled_by_locked_apply(
    runtime, project, tmp_path, hub, env
):
    """A repo adapter from the local Hub stand-in (needs the stub image rebuilt with its
    --enable-lora/--lora-modules flags: tests/images/build.sh)."""
    hub.add("org/tiny", tiny_files())
    first = hub.add("org/sql-lora", adapter_files(1))
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    text = (
        open(path)
        .read()
        .replace(
            '    env: {AIGO_STUB_LOAD_SECONDS: "0.2"}\n',
            '    env: {AIGO_STUB_LOAD_SECONDS: "0.2"}\n    adapters:\n      sql: {source: {repo: org/sql-lora}}\n',
        )
    )
    assert "adapters:" in text
    open(path, "w").write(text)
    planned = run_cli("plan", "-f", path, env=env)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "LoRA adapter sql of model tiny: org/sql-lora@main is not on this machine: 2 files, " in planned.stdout
    assert f"commit {first[:12]}" in planned.stdout
    result = run_cli("apply", "-f", path, "-y", env={**env, "HF_TOKEN": "hf_never_shown"})
    assert result.returncode == 0, result.stdout + result.stderr
    folder = tmp_path / "store" / "adapters" / "org--sql-lora" / "main"  # never a model's folder
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        "adapter_config.json",
        "adapter_model.safetensors",
    ]  # no README, no training args, no checkpoint folder
    marker = json.loads((folder / ".aigo-download.json").read_text())
    assert (marker["commit"], marker["kind"]) == (first, "adapter")
    inspected = runtime.api.inspect_container(f"aigo-{project}-tiny")
    assert (str(folder), "/adapters/sql", False) in {
        (m["Source"], m["Destination"], m["RW"]) for m in inspected["Mounts"] if m["Type"] == "bind"
    }
    assert "hf_never_shown" not in json.dumps(inspected) + result.stdout + result.stderr
    # sized by the rank the Hub's adapter_config.json declares from the first plan: no replace follows
    assert "--max-lora-rank 8" in " ".join(inspected["Config"]["Cmd"])
    again = run_cli("plan", "-f", path, "--detailed-exitcode", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    lock_text = (tmp_path / "aigo.lock").read_text()
    assert json.loads(lock_text)["models"]["adapter:org/sql-lora@main"] == {
        "commit": first,
        "models": ["tiny"],
        "adapters": ["sql"],
    }
    listed = json.loads(run_cli("models", "list", "-f", path, "-o", "json", env=env).stdout)["models"]
    assert [(r["repo"], r.get("kind"), r["used_by"]) for r in listed] == [
        ("org/sql-lora", "adapter", ["tiny"]),
        ("org/tiny", None, ["tiny"]),
    ]

    moved = hub.add("org/sql-lora", adapter_files(2))  # someone pushes to the adapter's main
    planned = run_cli("plan", "-f", path, env=env)
    assert (
        f"aigo.lock: adapter:org/sql-lora@main now points to commit {moved[:12]} on the Hub; "
        f"aigo.lock records {first[:12]}"
    ) in planned.stdout

    # a fresh machine set up from the config repo: the locked apply fetches the recorded adapter commit
    runtime.api.remove_container(f"aigo-{project}-tiny", force=True)
    import shutil

    shutil.rmtree(tmp_path / "store")
    hub.requests.clear()
    locked = run_cli("apply", "-f", path, "-y", "--locked", env=env)
    assert locked.returncode == 0, locked.stdout + locked.stderr
    assert (folder / "adapter_model.safetensors").read_bytes() == adapter_files(1)["adapter_model.safetensors"]
    assert all(f"/resolve/{first}/" in p for p, _ in hub.file_gets() if "/org/sql-lora/" in p)
    assert (tmp_path / "aigo.lock").read_text() == lock_text  # nothing new to record


def with_adapter(path: str, adapter: str = "sql: {source: {repo: org/sql-lora}}") -> None:
    text = open(path).read()
    line = '    env: {AIGO_STUB_LOAD_SECONDS: "0.2"}\n'
    assert line in text
    open(path, "w").write(text.replace(line, f"{line}    adapters:\n      {adapter}\n"))


def test_a_store_of_the_older_layout_is_taken_over_by_links_and_nothing_is_downloaded_again(
    tmp_path, hub, env, project
):
    """The older layout kept a repo adapter beside the models (STORE/ORG--NAME/REVISION): that folder,
    whose marker records exactly the adapter, is linked into STORE/adapters/... without a download."""
    hub.add("org/tiny", tiny_files())
    hub.add("org/sql-lora", adapter_files(1))
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    with_adapter(path)
    assert run_cli("models", "pull", "-f", path, env=env).returncode == 0
    store = tmp_path / "store"
    older = store / "org--sql-lora" / "main"
    older.parent.mkdir()
    (store / "adapters" / "org--sql-lora" / "main").rename(older)  # where the older aigo-apply put it
    (store / "adapters" / "org--sql-lora").rmdir()
    planned = run_cli("plan", "-f", path, env=env)
    assert f"org/sql-lora@main is in {older}, where an older aigo-apply kept it" in planned.stdout, planned.stdout
    listed = json.loads(run_cli("models", "list", "-f", path, "-o", "json", env=env).stdout)["models"]
    older_row = next(r for r in listed if r["folder"] == str(older))
    assert older_row["moved"] == str(store / "adapters" / "org--sql-lora" / "main") and older_row["used_by"] == []
    hub.requests.clear()  # (the plan asked the Hub for the adapter's config, as for any folder not complete)
    pulled = run_cli("models", "pull", "-f", path, env=env)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert "linked into" in pulled.stdout and hub.file_gets() == []  # nothing downloaded again
    new = store / "adapters" / "org--sql-lora" / "main"
    assert (new / "adapter_model.safetensors").stat().st_ino == (older / "adapter_model.safetensors").stat().st_ino
    assert "already on this machine" in run_cli("models", "pull", "-f", path, env=env).stdout


def test_an_adapter_repo_without_adapter_config_is_refused_with_what_was_found(tmp_path, hub, env, project):
    hub.add("org/tiny", tiny_files())
    hub.add("org/not-lora", {"README.md": b"hi", "adapter_model.safetensors": b"x"})
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    text = (
        open(path)
        .read()
        .replace(
            '    env: {AIGO_STUB_LOAD_SECONDS: "0.2"}\n',
            '    env: {AIGO_STUB_LOAD_SECONDS: "0.2"}\n    adapters:\n      x: {source: {repo: org/not-lora}}\n',
        )
    )
    open(path, "w").write(text)
    result = run_cli("models", "pull", "-f", path, env=env)
    assert result.returncode == 1
    assert (
        "org/not-lora is not a LoRA adapter vLLM can load: it needs adapter_config.json and .safetensors (or .bin) "
        "weights at its top level; found README.md, adapter_model.safetensors" in result.stderr
    )


@pytest.mark.parametrize("link_at", ["org--tiny/main", "org--tiny", "org--tiny/main/.cache"])
def test_a_link_committed_in_the_model_store_blocks_the_plan_and_no_download_writes_through_it(
    tmp_path, hub, env, project, link_at
):
    """A config repository can commit a symlink where the store lays out a download's folder: the plan
    blocks on it (model.store), and neither apply nor `models pull` writes a byte where it leads."""
    hub.add("org/tiny", tiny_files())
    path = config(tmp_path, project, "{repo: org/tiny}", free_port())
    victim = tmp_path / "victim"
    victim.mkdir()
    link = tmp_path / "store" / link_at
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)
    planned = run_cli("plan", "-f", path, env=env)
    assert planned.returncode == 1, planned.stdout + planned.stderr
    assert "model.store" in planned.stdout + planned.stderr and f"{link} is a symbolic link" in planned.stdout
    applied = run_cli("apply", "-f", path, "-y", env=env)
    assert applied.returncode == 1 and "model.store" in applied.stdout + applied.stderr
    pulled = run_cli("models", "pull", "-f", path, env=env)
    assert pulled.returncode == 1 and "is a symbolic link" in pulled.stdout + pulled.stderr, pulled.stdout
    assert list(victim.iterdir()) == [] and hub.file_gets("model.safetensors") == []  # (plans read config.json)
