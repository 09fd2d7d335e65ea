"""No traceback from outside answers: every reader of something the tool does not
write itself takes any shape and answers with a safe reading or the product's own error (an
AigoError naming the source), never another exception. One property per reader, over arbitrary
JSON/YAML (biased towards the keys each reader looks at):
- a kubeconfig (adapters/kubeconfig.py, then lightkube);
- a model store's download marker (observe/markers.read_marker) and what reads it after
  (`models list`, lock, completeness);
- the Docker engine's answers: the bytes on the socket (adapters/docker_http.py), the container and
  image lists, /info, a container's state, an image's inspection and the event stream
  (observe/docker_answers.py, through adapters/docker_engine.py), then the parsers, host checks and
  aigo.lock that read them;
- a model's config.json (a folder's or the Hub's) in the VRAM estimate;
- the Kubernetes API's LIST answers and a Deployment's status (platforms/kubernetes/observe.py, platforms/kubernetes/rollout.py)."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aigo_apply.adapters import docker_http
from aigo_apply.adapters.docker_engine import DockerRuntime, _EngineEvents
from aigo_apply.adapters.host import docker_facts, docker_facts_from_info
from aigo_apply.adapters.kube_client import KubeClient
from aigo_apply.app.models import listing, render
from aigo_apply.desired import labels as L
from aigo_apply.desired.model_store import MARKER, is_complete
from aigo_apply.errors import AigoError, DockerUnavailable, KubeUnavailable
from aigo_apply.observe.containers import parse_state, running_engines
from aigo_apply.observe.markers import read_marker
from aigo_apply.plan import lockfile
from aigo_apply.plan.host_checks import run_checks
from aigo_apply.plan.vram import estimate
from aigo_apply.platforms.kubernetes.observe import KINDS, parse_cluster
from aigo_apply.platforms.kubernetes.rollout import diagnose, job_status, rollout_status

from helpers.planner_inputs import desired, running

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _shapes(keys: list[str]) -> st.SearchStrategy[Any]:
    """Any JSON value, its mappings keyed mostly by `keys` (what the reader looks up)."""
    scalars = (
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=12)
    )
    key = st.sampled_from(keys) | st.text(max_size=6)
    return st.recursive(
        scalars | st.sampled_from(keys),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(key, inner, max_size=6),
        max_leaves=30,
    )


# -- kubeconfig -------------------------------------------------------------------------------------

KUBE_KEYS = ["clusters", "contexts", "users", "current-context", "name", "cluster", "context", "user", "server",
             "namespace", "token", "a", "c", "u", "https://k.test"]  # fmt: skip


@SETTINGS
@given(data=_shapes(KUBE_KEYS))
def test_a_kubeconfig_of_any_shape_is_read_or_refused_naming_the_file(tmp_path, data):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(data))
    try:
        KubeClient.connect(str(path)).close()
    except KubeUnavailable as exc:
        assert str(path) in str(exc)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[1, 2]\n", "is a list, not a mapping with clusters, contexts and users"),
        ("42\n", "is a number"),
        ("", "is empty"),
        ("clusters: {a: 1}\ncontexts: []\n", "`clusters` is a mapping, not a list"),
        ("clusters: [1]\ncontexts: []\n", "`clusters[0]` is a number, not a mapping"),
        ("clusters: []\ncontexts: [{name: a, context: 7}]\n", "`contexts[0].context` is a number, not a mapping"),
        ("clusters: []\ncontexts: []\ncurrent-context: [a]\n", "`current-context` is a list, not a name"),
        ("clusters: [{name: c, cluster: {server: 5}}]\ncontexts: [{name: a, context: {cluster: c}}]\n"
         "current-context: a\n", "cannot read the kubeconfig"),
        ("a: [\n", "is not YAML"),
        ("clusters: []\n", "has no `contexts` list"),
    ],
)  # fmt: skip
def test_kubeconfig_shapes_lightkube_broke_on_are_clear_errors(tmp_path, text, said):
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeUnavailable, match=re.escape(said)) as caught:
        KubeClient.connect(str(path))
    assert str(path) in str(caught.value) and "Traceback" not in str(caught.value)


def test_a_kubeconfig_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(KubeUnavailable, match="not a regular file"):
        KubeClient.connect(str(tmp_path / "fifo"))


# -- the model store's marker -----------------------------------------------------------------------

MARKER_KEYS = ["files", "commit", "repo", "revision", "sha256", "complete_repo", "downloaded_at", "config.json",
               "c" * 40, "model.safetensors"]  # fmt: skip


def _store_with(tmp_path: Path, content: bytes) -> Path:
    store = tmp_path / "store"
    folder = store / "org" / "m@main"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_bytes(content)
    return folder


def _read_everywhere(tmp_path: Path, folder: Path) -> None:
    marker = read_marker(folder)
    if marker is not None:
        assert all(isinstance(k, str) and type(v) is int and v >= 0 for k, v in marker["files"].items())
        assert all(isinstance(marker[k], str) for k in ("repo", "revision", "commit", "downloaded_at") if k in marker)
    is_complete(marker, {"repo": "org/m", "revision": "main", "file": "config.json"}, "c" * 40)
    is_complete(marker, {"repo": "org/m", "revision": "main", "kind": "adapter"})
    fake = types.SimpleNamespace(specs=dict)
    assert isinstance(render(listing(fake, tmp_path / "store")), str)


@SETTINGS
@given(data=_shapes(MARKER_KEYS))
def test_a_marker_of_any_shape_reads_as_a_marker_or_as_none(tmp_path, data):
    _read_everywhere(tmp_path, _store_with(tmp_path, json.dumps(data).encode()))


@SETTINGS
@given(raw=st.binary(max_size=200) | st.just(b"[" * 5000) | st.just(b'{"files": {"a": "12 GB"}}'))
def test_a_marker_of_any_bytes_reads_as_a_marker_or_as_none(tmp_path, raw):
    _read_everywhere(tmp_path, _store_with(tmp_path, raw))


def test_a_marker_with_sizes_that_are_not_numbers_is_no_marker(tmp_path):
    folder = _store_with(tmp_path, b'{"files": {"model.safetensors": "12 GB"}, "commit": "' + b"c" * 40 + b'"}')
    assert read_marker(folder) is None  # the folder downloads again; `models list` shows it without a traceback
    import os

    (folder / MARKER).unlink()
    os.mkfifo(folder / MARKER)
    assert read_marker(folder) is None  # a FIFO is never opened for reading


# -- the Docker engine's answers --------------------------------------------------------------------

DOCKER_KEYS = ["Id", "Names", "State", "Status", "Image", "ImageID", "Labels", "Ports", "IP", "PublicPort",
               "PrivatePort", "RepoTags", "RepoDigests", "ServerVersion", "Components", "Name", "Version",
               "OperatingSystem", "Runtimes", "nvidia", "DiscoveredDevices", "Source", "ID", "cdi", "Running",
               "Paused", "Restarting", "ExitCode", "Health", "Actor", "Attributes", "status", "id", "die",
               L.MANAGED_BY, L.PROJECT, L.MODEL, L.ROLE, "lab", "aigo-apply"]  # fmt: skip


class _FakeHTTP:
    def __init__(self, answers: dict[str, Any]):
        self.answers = answers

    def get(self, path: str, params: Any = None) -> Any:
        return self.answers[path]


class _FakeSDK:
    def __init__(self, answer: Any):
        self.answer = answer

    def inspect_container(self, container: str) -> Any:
        return self.answer

    def inspect_image(self, reference: str) -> Any:
        return self.answer


def _runtime(containers: Any, images: Any, info: Any, inspected: Any) -> DockerRuntime:
    runtime = DockerRuntime(base_url="unix:///nonexistent/docker.sock")
    runtime._http = _FakeHTTP({"/containers/json": containers, "/images/json": images, "/info": info})
    runtime._api = _FakeSDK(inspected)
    return runtime


@SETTINGS
@given(
    containers=_shapes(DOCKER_KEYS),
    images=_shapes(DOCKER_KEYS),
    info=_shapes(DOCKER_KEYS),
    inspected=_shapes(DOCKER_KEYS),
    events=st.lists(_shapes(DOCKER_KEYS), max_size=4),
)
def test_docker_answers_of_any_shape_are_read_or_refused(tmp_path, containers, images, info, inspected, events):
    d = _desired(tmp_path)
    runtime = _runtime(containers, images, info, inspected)
    for read in (runtime.list_containers, runtime.list_images, runtime.info):
        try:
            read()
        except DockerUnavailable as exc:
            assert "GET /" in str(exc)
    for call in (lambda: runtime.state("c"), lambda: runtime.inspect_image("i")):
        try:
            call()
        except DockerUnavailable as exc:
            assert "GET /" in str(exc)
    facts = docker_facts(lambda: runtime)
    assert facts["reachable"] is False or all(isinstance(r, str) for r in facts["runtimes"])
    run_checks({"docker": facts, "nvml": {"available": False, "gpus": []}}, d, {})
    try:
        found, listed = runtime.list_containers(), runtime.list_images()
    except DockerUnavailable:
        return
    parse_state("lab", found, listed)
    running_engines("lab", found)
    lockfile.build(d, listed, {})
    list(_EngineEvents(iter(events), "lab"))


def _desired(tmp_path):
    cached = getattr(_desired, "cached", None)
    if cached is None:
        cached = _desired.cached = desired(tmp_path)  # type: ignore[attr-defined]
    return cached


@pytest.mark.parametrize(
    "info",
    [{"Runtimes": "nvidia"}, {"Runtimes": ["nvidia"]}, {"DiscoveredDevices": "cdi"}, {"Components": [1, "x"]},
     {"ServerVersion": 29}, {"DiscoveredDevices": [{"Source": "cdi", "ID": 5}, 7]}, []],
)  # fmt: skip
def test_an_info_whose_fields_have_other_types_reads_safely(info):
    facts = docker_facts_from_info(info)
    assert facts["runtimes"] == [] and facts["cdi_devices"] == [] and isinstance(facts["version"], str)


def test_a_recorded_answer_with_odd_field_types_still_reads_its_good_parts(tmp_path):
    d = _desired(tmp_path)
    good = running(d)
    odd = [dict(good[0], Names="aigo-lab-alpha", Ports="8000"), dict(good[1], Labels=["x"]), 5, "x"]
    runtime = _runtime(
        odd, [{"Id": 5, "RepoTags": "local/engine:1"}, {"Id": "sha256:a", "RepoTags": [1, "t:1"]}], {}, {}
    )
    state = parse_state("lab", runtime.list_containers(), runtime.list_images())
    assert state.images == {"t:1": "sha256:a"}
    with pytest.raises(DockerUnavailable, match="answered GET /containers/json with an object, not a list"):
        _runtime({"message": "hi"}, [], {}, {}).list_containers()


class _Socket:
    def __init__(self, data: bytes):
        self.data = data

    def sendall(self, _: bytes) -> None:
        pass

    def recv(self, _: int) -> bytes:
        data, self.data = self.data, b""
        return data

    def close(self) -> None:
        pass


@SETTINGS
@given(
    body=st.binary(max_size=300)
    | st.builds(
        lambda head, chunks: head + chunks,
        st.sampled_from([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"HTTP/1.0 500 x\r\n\r\n"]),
        st.binary(max_size=100) | st.sampled_from([b"-6\r\n", b"-5\r\nabc\r\n", b"+3\r\nabc\r\n0\r\n", b"[" * 5000]),
    )
)
def test_the_bytes_on_the_docker_socket_are_read_or_refused(body):
    client = docker_http.DockerHTTP(lambda: _Socket(body), "1.41")
    try:
        client.get("/info")
    except (ValueError, DockerUnavailable):
        pass  # the runtime maps ValueError to DockerUnavailable (adapters/docker_engine._get)


# -- a model's config.json --------------------------------------------------------------------------

CONFIG_KEYS = ["num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
               "layer_types", "sliding_window", "kv_lora_rank", "qk_rope_head_dim", "torch_dtype",
               "hybrid_override_pattern", "attn_layer_period", "attn_layer_offset", "full_attention_interval",
               "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "mamba_d_state", "n_groups", "conv_kernel",
               "mamba_expand", "mamba_d_conv", "text_config", "sliding_attention", "full_attention"]  # fmt: skip


@SETTINGS
@given(config=_shapes(CONFIG_KEYS), tp=st.integers(1, 8))
def test_a_config_json_of_any_shape_gives_an_estimate(config, tp):
    result = estimate(config if isinstance(config, dict) else None, 10**9, 4096, tp)
    assert result.kv_cache is None or (type(result.kv_cache) is int and result.kv_cache >= 0)


# -- the Kubernetes API's answers -------------------------------------------------------------------

KUBE_API_KEYS = ["metadata", "name", "labels", "annotations", "spec", "status", "replicas", "generation",
                 "observedGeneration", "updatedReplicas", "availableReplicas", "conditions", "type", "reason",
                 "containerStatuses", "state", "waiting", "terminated", "deletionTimestamp", "data", "template",
                 "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/component",
                 "aigo-apply", "lab", "model", "router", L.MANAGED_BY, L.PROJECT, L.MODEL, L.ROLE]  # fmt: skip


@SETTINGS
@given(lists=st.fixed_dictionaries({kind: st.lists(_shapes(KUBE_API_KEYS), max_size=3) for kind in KINDS}))
def test_kubernetes_list_answers_of_any_shape_are_read(lists):
    parse_cluster("lab", "ns", lists)
    for objects in lists.values():
        for obj in objects:
            if isinstance(obj, dict):
                rollout_status(obj)
                job_status(obj)
        diagnose([o for o in objects if isinstance(o, dict)])


def test_every_error_here_is_the_products_own():
    assert issubclass(KubeUnavailable, AigoError) and issubclass(DockerUnavailable, AigoError)


@pytest.mark.parametrize(
    "lock, where",
    [
        ({"version": 1, "images": []}, "images is not a mapping"),
        ({"version": 1, "images": {"vllm/vllm-openai:v1": "sha256:x"}}, "images.vllm/vllm-openai:v1 is not a mapping"),
        ({"version": 1, "images": {"a:1": {"id": 5}}}, "images.a:1.id is not text"),
        ({"version": 1, "models": {"org/x@main": {"models": ["x"]}}}, "models.org/x@main.commit is missing"),
        ({"version": 1, "models": {"org/x@main": {"commit": "c", "models": "x"}}}, "is not a list of aliases"),
        ({"version": 1, "models": None}, "models is not a mapping"),
    ],
)
def test_a_lock_file_of_the_wrong_shape_is_a_clear_error_naming_the_place(tmp_path, lock, where):
    import json

    from aigo_apply.errors import AigoError
    from aigo_apply.platforms import lock_file

    path = tmp_path / "aigo.lock"
    path.write_text(json.dumps(lock))
    with pytest.raises(AigoError, match="edited or damaged") as caught:
        lock_file.read(path)
    assert where in str(caught.value) and str(path) in str(caught.value)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
        max_leaves=12,
    )
)
def test_a_lock_file_of_any_shape_reads_or_is_refused_never_a_traceback(tmp_path_factory, data):
    import json

    from aigo_apply.errors import AigoError
    from aigo_apply.platforms import lock_file

    path = tmp_path_factory.mktemp("lock") / "aigo.lock"
    path.write_text(json.dumps({"version": 1, "images": data, "models": data}))
    try:
        lock = lock_file.read(path)
    except AigoError:
        return
    lockfile.drift(lock, _empty_desired(tmp_path_factory), {}, {}, {})


def _empty_desired(factory):
    from helpers.planner_inputs import desired

    return desired(factory.mktemp("d"))
