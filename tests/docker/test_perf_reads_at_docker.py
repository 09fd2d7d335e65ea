"""On the real engine: the plan's three reads over the bare socket (adapters/docker_http.py) answer
what the docker SDK answers, so swapping the SDK out of the plan path changed no input."""

from __future__ import annotations

from aigo_apply.adapters.docker_engine import DockerRuntime


def test_the_bare_socket_reads_answer_what_the_sdk_answers(runtime):
    light = DockerRuntime()
    assert light._http is not None  # the test machine's engine is on a Unix socket
    sdk = DockerRuntime()
    sdk._http = None  # every read through the SDK, as before
    assert sorted(i["Id"] for i in light.list_images()) == sorted(i["Id"] for i in sdk.list_images())
    mine = {c["Id"]: c for c in light.list_containers()}
    theirs = {c["Id"]: c for c in sdk.list_containers()}
    for cid in mine.keys() & theirs.keys():  # other sessions create and remove containers meanwhile
        for key in ("Names", "Labels", "Image", "ImageID", "Ports"):
            assert mine[cid].get(key) == theirs[cid].get(key)
    assert light.info()["ServerVersion"] == sdk.info()["ServerVersion"]
    assert light.calls == 3 and light._api is None
