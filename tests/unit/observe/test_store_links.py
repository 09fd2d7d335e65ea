"""observe/markers.store_link: a download folder of the model store is written into and mounted only
where the store lays out real folders; a link a config repository committed there is refused."""

from __future__ import annotations

import os

from aigo_apply.observe.markers import store_link, store_link_problems
from aigo_apply.plan.host_checks import store_checks


def spec(store, repo="org/tiny", revision="main"):
    org, name = repo.split("/")
    return {"source": {"repo": repo, "revision": revision}, "model_dir": str(store / f"{org}--{name}" / revision)}


def test_a_missing_or_real_folder_may_be_downloaded_into(tmp_path):
    dest = tmp_path / "store" / "org--tiny" / "main"
    assert store_link(dest) is None  # nothing there: the download makes real folders
    (dest / ".cache" / "huggingface").mkdir(parents=True)
    (dest / "config.json").write_text("{}")
    assert store_link(dest) is None


def test_a_link_at_the_folder_or_its_repo_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = tmp_path / "store" / "org--tiny"
    repo.mkdir(parents=True)
    (repo / "main").symlink_to(elsewhere)
    assert store_link(repo / "main") == f"{repo / 'main'} is a symbolic link (to {elsewhere})"
    assert store_link(repo / "main", inside=False) is not None  # a complete folder is mounted: still refused
    other = tmp_path / "store" / "org--other"
    other.symlink_to(elsewhere)
    assert store_link(other / "main") == f"{other} is a symbolic link (to {elsewhere})"
    (tmp_path / "store" / "org--file").write_text("x")
    assert (
        store_link(tmp_path / "store" / "org--file" / "main") == f"{tmp_path / 'store' / 'org--file'} is not a folder"
    )


def test_a_link_or_a_fifo_inside_counts_only_where_a_download_will_write(tmp_path):
    dest = tmp_path / "store" / "org--tiny" / "main"
    (dest / ".cache").mkdir(parents=True)
    (dest / ".cache" / "huggingface").symlink_to("/etc")
    assert store_link(dest) == f"{dest / '.cache' / 'huggingface'} is a symbolic link (to /etc)"
    assert store_link(dest, inside=False) is None
    os.unlink(dest / ".cache" / "huggingface")
    os.mkfifo(dest / "model.safetensors")
    assert store_link(dest) == f"{dest / 'model.safetensors'} is not a regular file"


def test_the_plan_names_each_model_whose_download_folder_is_a_link(tmp_path):
    store = tmp_path / "store"
    (store / "org--tiny").mkdir(parents=True)
    (store / "org--tiny" / "main").symlink_to(tmp_path)
    specs = {"a": spec(store), "b": spec(store), "c": spec(store, "org/fine")}
    problems = store_link_problems(specs, {})
    assert sorted(problems) == ["a", "b"]
    checks = store_checks(problems)
    assert [(c.id, c.status) for c in checks] == [("model.store", "blocking")] * 2
    assert checks[0].message.startswith("model 'a': org/tiny@main: ") and "symbolic link" in checks[0].message
    complete = {
        str(store / "org--fine" / "main"): {
            "repo": "org/fine",
            "revision": "main",
            "files": {"x": 1},
            "complete_repo": True,
        }
    }
    (store / "org--fine" / "main").mkdir(parents=True)
    (store / "org--fine" / "main" / "x").symlink_to("/etc/passwd")
    assert "c" not in store_link_problems(specs, complete)  # complete: mounted only, its inside is not walked
    assert "c" in store_link_problems(specs, {})
