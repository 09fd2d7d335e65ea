"""`update: sleep` is a way of replacing an engine on Docker (the old one sleeps on its socket while
the new one starts): a cluster replaces a pod by its rollout, so there the setting renders nothing,
neither vLLM's sleep mode nor its development endpoints (which every pod could reach through the
model's Service), and a file that sets it renders the same objects as one that does not."""

from __future__ import annotations

import json

from aigo_apply.kube.manifests import objects
from aigo_apply.kube.settings import settings_of
from aigo_apply.kube.specs import desired_for_kubernetes
from aigo_apply.observe.config_file import load_config

from helpers.configs import write_config
from helpers.planner_inputs import CONFIG, desired

ON_GPUS = CONFIG.replace("{path: /m/alpha}", "{repo: org/alpha}").replace("gpus: none", "gpus: [0]", 1)
SLEEPS = ON_GPUS.replace("    context_length: 4096\n", "    context_length: 4096\n    update: sleep\n", 1)


def test_a_model_that_sleeps_through_a_replace_on_docker_renders_as_any_other_on_a_cluster(tmp_path):
    assert SLEEPS != ON_GPUS
    settings = settings_of(load_config(str(write_config(tmp_path, SLEEPS))).data)
    docker = desired(tmp_path, SLEEPS)
    assert docker.models["alpha"].spec.get("sleep_mode") is True  # on Docker it starts with sleep mode...
    assert "--enable-sleep-mode" in docker.models["alpha"].container.command
    rendered = objects(docker, settings)  # ...on a cluster it does not, and nothing refuses it
    assert rendered == objects(desired(tmp_path, ON_GPUS), settings)
    text = json.dumps(rendered)
    assert "--enable-sleep-mode" not in text and "VLLM_SERVER_DEV_MODE" not in text
    assert "sleep_mode" not in desired_for_kubernetes(docker).models["alpha"].spec
