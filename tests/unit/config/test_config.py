"""`aigo-apply validate`: every problem at once, as FILE:LINE:COL: path: message, with hints."""

from __future__ import annotations

import json

import pytest

from aigo_apply.errors import ConfigInvalid
from aigo_apply.observe.config_file import load_config

from helpers.cli import run_cli
from helpers.configs import write_config
from helpers.paths import EXAMPLES

GOOD = """
version: 1
project: lab
models:
  qwen:
    source: {repo: Qwen/Qwen3-8B}
    context_length: 32768
"""


def problems(tmp_path, text):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    return [p.format().replace(str(path), "F") for p in info.value.problems]


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_example_validates(example):
    result = run_cli("validate", "-f", f"examples/{example}")
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_broken_file_reports_every_problem_with_position(tmp_path):
    path = write_config(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          qwen:
            source: {repo: Qwen/Qwen3-8B}
            context_lenght: 32768
            gpus: [0]
            vllm:
              tool_call_parser: qwen3coder
              moe_backend: FlashInfer-CUTLASS
          "bad alias":
            source: {path: /srv/m}
            context_length: 0
            gpus: none
        """,
    )
    result = run_cli("validate", "-f", str(path))
    assert result.returncode == 1
    err = result.stderr.replace(str(path), "F").splitlines()
    assert err[:-1] == [
        "F:4:3: models.qwen: missing required key 'context_length'",
        "F:6:5: models.qwen.context_lenght: unknown key 'context_lenght' (did you mean 'context_length'?)",
        "F:9:25: models.qwen.vllm.tool_call_parser: 'qwen3coder' is not a tool_call_parser that vLLM v0.31.0 knows (did you mean 'qwen3_coder'?)",
        "F:10:20: models.qwen.vllm.moe_backend: 'FlashInfer-CUTLASS' is not a moe_backend that vLLM v0.31.0 knows (did you mean 'flashinfer_cutlass'?)",
        "F:11:3: models.\"bad alias\": alias 'bad alias' is not a safe name: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (clients send it as `model`)",
        'F:13:21: models."bad alias".context_length: 0 tokens is out of range; use 1 to 16777216',
    ]
    assert err[-1].startswith("error: F: 6 problems found; nothing was changed.")
    assert "Traceback" not in result.stderr


def test_validate_json_output(tmp_path):
    path = write_config(tmp_path, GOOD.replace("32768", "-5"))
    result = run_cli("validate", "-f", str(path), "--output", "json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    assert report["problems"][0]["path"] == "models.qwen.context_length"
    assert report["problems"][0]["line"] == 6


def test_duplicate_ports_and_router_clash(tmp_path):
    assert problems(
        tmp_path,
        """
        version: 1
        project: lab
        router: {port: 9000}
        models:
          a: {source: {path: /m/a}, context_length: 4096, gpus: none, port: 9001}
          b: {source: {path: /m/b}, context_length: 4096, gpus: none, port: 9001}
          c: {source: {path: /m/c}, context_length: 4096, gpus: none, port: 9000}
        """,
    ) == [
        "F:6:69: models.b.port: port 9001 is already used by model 'a'; each model needs its own port",
        "F:7:69: models.c.port: port 9000 is the router's port (router.port); choose another port for this model",
    ]


def test_gpu_fractions_over_one_gpu(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          a: {source: {path: /m/a}, context_length: 4096, gpus: [0]}
          b: {source: {path: /m/b}, context_length: 4096, gpus: [0, 1], vllm: {gpu_memory_utilization: 0.3}}
          c: {source: {path: /m/c}, context_length: 4096, gpus: [1], vllm: {gpu_memory_utilization: 0.5}}
        """,
    )
    assert len(found) == 1
    assert found[0].startswith(
        "F:5:72: models.b.vllm.gpu_memory_utilization: GPU 0 would be over-committed: "
        "a (0.9) + b (0.3) = 1.20 of its memory"
    )


def test_gpu_fractions_all_gpus_and_defaults(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          a: {source: {path: /m/a}, context_length: 4096}
          b: {source: {path: /m/b}, context_length: 4096}
          c: {source: {path: /m/c}, context_length: 4096, gpus: none}
        """,
    )
    assert len(found) == 1 and "every GPU would be over-committed: a (0.9) + b (0.9) = 1.80" in found[0]


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("context_length: 32k", None),
        ("context_length: 25.6k", None),
        ("context_length: auto", "lets vLLM pick the length at start-up"),
        ("context_length: 32KB", "is not a token count"),
        ("context_length: 1.5K", "decimals are only allowed with lowercase"),
        ("context_length: 99999999", "out of range"),
        ("context_length: true", "must be an integer or a string, not true (true/false)"),
    ],
)
def test_context_length_forms(tmp_path, snippet, expected):
    text = GOOD.replace("context_length: 32768", snippet)
    if expected is None:
        load_config(str(write_config(tmp_path, text)))
    else:
        assert expected in " ".join(problems(tmp_path, text))


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("    env: {MY_PASSWORD: abcdef}", "MY_PASSWORD looks like a secret written in clear; pass it by reference"),
        ("    env: {MY_TOKEN: {from_env: MY_TOKEN, x: 1}}", "must be a plain value on one line, or a secret reference"),
        (
            "    env: {HF_TOKEN: {from_env: HF_TOKEN}}",
            "models.qwen.env.HF_TOKEN: engine containers never get a Hugging "
            "Face token: aigo-apply downloads models on this host",
        ),
        ("    env: {BAD-NAME: x}", "'BAD-NAME' is not a valid environment variable name"),
        ('    env: {LOG: "a\\nb"}', "must be a plain value on one line"),
        ("    vllm: {quantization: fbgemm_fp8}", "'fbgemm_fp8' is deprecated in vLLM v0.31.0"),
        (
            "    vllm: {tensor_parallel_size: 2}\n    gpus: [0]",
            "tensor_parallel_size 2 needs 2 GPUs but `gpus` lists 1",
        ),
        ("    gpus: [0, 0]", "must be 'all', 'none' or a list of distinct GPU indices"),
        ("    gpus: some", "must be 'all', 'none' or a list of distinct GPU indices"),
        ("    port: 70000", "must be at most 65535, not 70000"),
        ("    vllm: {gpu_memory_utilization: 0}", "must be greater than 0, not 0"),
        ('    vllm: {tool_call_parser: "--evil"}', "is not a tool_call_parser that vLLM v0.31.0 knows"),
        ("    vllm: {reasoning_parser: hermes}", "is not a reasoning_parser that vLLM v0.31.0 knows"),
        ('    vllm: {extra_args: "--foo"}', "unknown key 'extra_args'"),
        (
            "    source: {repo: a/b, path: /x}",
            "needs either `repo` (with an optional `revision` and `file`) or `path`, not both",
        ),
        ("    engine: tgi", "'tgi' is not one of vllm"),
    ],
)
def test_model_level_problems(tmp_path, snippet, expected):
    text = GOOD + snippet + "\n"
    if "source:" in snippet:
        text = text.replace("    source: {repo: Qwen/Qwen3-8B}\n", "", 1)
    found = " | ".join(problems(tmp_path, text))
    assert expected in found


@pytest.mark.parametrize(
    "text, expected",
    [
        ("version: 2\nproject: lab\nmodels: {}\n", "F:1:10: version: must be 1"),
        ("version: 1\nproject: Lab!\nmodels: {}\n", "F:2:10: project: must be 1-32 lowercase letters"),
        ("version: 1\nproject: lab\nmodels: {}\nrouter: {bind: localhost}\n", "router.bind: must be an IP address"),
        ("version: 1\nproject: lab\nmodels: {}\nrouter: {bind: 300.1.1.1}\n", "'300.1.1.1' is not an IP address"),
        (
            "version: 1\nproject: lab\nmodels: {}\nengines: {vllm: {image_tag: 'vllm/vllm-openai:v0.30.0'}}\n",
            "engines.vllm.image_tag: write only the tag here, e.g. image_tag: v0.30.0",
        ),
        (
            "version: 1\nproject: lab\nmodels: {}\nengines: {vllm: {image_tag: 'v0.31.0@sha256:" + "a" * 64 + "'}}\n",
            "engines.vllm.image_tag: an image digest (@sha256:...) is not written in the file",
        ),
        (
            "version: 1\nproject: lab\nmodels: {}\nrouter: {image: 'haproxy@sha256:" + "0" * 64 + "'}\n",
            "router.image: an image digest (@sha256:...) is not written in the file",
        ),
        (
            "version: 1\nproject: lab\nmodels: {}\nengines: {vllm: {image: 'vllm/vllm-openai:v0.30.0'}}\n",
            "must be an image repository without a tag",
        ),
        (
            "version: 1\nproject: lab\nmodels: {}\nrouter: {api_keys: sk-123}\n",
            "router.api_keys: must be a reference {from_env: NAME} or {from_file: PATH}, never the secret itself",
        ),
        ("- just\n- a list\n", "F:1:1: must be a mapping, not a list"),
        ("version: 1\nprojekt: lab\nmodels: {}\n", "unknown key 'projekt' (did you mean 'project'?)"),
        (
            "version: 1\nproject: lab\nmodels: {}\nmystery: 1\n",
            "unknown key 'mystery'; allowed here: defaults, engines, kubernetes, models, platform, project, router, version",
        ),
    ],
)
def test_top_level_problems(tmp_path, text, expected):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigInvalid) as info:
        load_config(str(path))
    found = " | ".join(p.format().replace(str(path), "F") for p in info.value.problems)
    assert expected in found


def test_models_mapping_aliases_case_collision(tmp_path):
    found = problems(
        tmp_path,
        """
        version: 1
        project: lab
        models:
          Qwen: {source: {path: /m/a}, context_length: 4096, gpus: none}
          qwen: {source: {path: /m/b}, context_length: 4096, gpus: none}
        """,
    )
    assert found == [
        "F:5:3: models.qwen: alias 'qwen' differs from 'Qwen' only in case; clients would confuse them, rename one"
    ]


def test_file_choice_flag_env_and_default(tmp_path):
    write_config(tmp_path, GOOD)
    other = write_config(tmp_path, GOOD.replace("lab", "other"), "other.yaml")
    assert "project 'lab'" in run_cli("validate", cwd=tmp_path).stdout
    assert "project 'other'" in run_cli("validate", env={"AIGO_FILE": str(other)}, cwd=tmp_path).stdout
    assert "project 'lab'" in run_cli("validate", "-f", "aigo.yaml", env={"AIGO_FILE": str(other)}, cwd=tmp_path).stdout
    missing = run_cli("validate", cwd=tmp_path / "..")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "error: aigo.yaml: no aigo.yaml here: `aigo-apply init` writes a starter file (or -f FILE / AIGO_FILE)"
    )


def test_exit_codes_for_usage_and_version():
    assert run_cli("--version").stdout.startswith("aigo-apply, version ")
    bad = run_cli("plan", "--no-such-flag")
    assert bad.returncode == 64 and "No such option" in bad.stderr
    assert run_cli("nonsense").returncode == 64


@pytest.mark.parametrize(
    "command", [["validate"], ["plan"], ["apply", "-y"], ["status"], ["render", "qwen"], ["destroy", "-y"]]
)
def test_bad_values_are_refused_before_any_docker_call(tmp_path, monkeypatch, command, capsys):
    import aigo_apply.adapters.docker_engine
    from aigo_apply.cli.main import main

    calls = []

    class Counting(aigo_apply.adapters.docker_engine.DockerRuntime):
        def __init__(self, *a, **k):
            calls.append("constructed")
            super().__init__(*a, **k)

    monkeypatch.setattr(aigo_apply.adapters.docker_engine, "DockerRuntime", Counting)
    path = write_config(tmp_path, GOOD + '    vllm: {tool_call_parser: "hermes --api-key x", moe_backend: tritn}\n')
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "-f", str(path)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "models.qwen.vllm.tool_call_parser: 'hermes --api-key x' is not a tool_call_parser" in err
    assert (
        "models.qwen.vllm.moe_backend: 'tritn' is not a moe_backend that vLLM v0.31.0 knows (did you mean 'triton'?)"
        in err
    )
    assert calls == []  # not a single Docker call, not even a client


def test_a_file_found_valid_is_not_schema_checked_again_but_an_edit_is(tmp_path):
    import subprocess
    import sys

    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    path = write_config(tmp_path, GOOD)

    def validate_imports_jsonschema() -> bool:
        run = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "aigo_apply", "validate", "-f", str(path)],
            capture_output=True,
            text=True,
            env=env,
        )
        assert run.returncode == 0, run.stderr
        return "| jsonschema" in run.stderr

    assert validate_imports_jsonschema() is True
    assert len(list((tmp_path / "cache" / "aigo-apply" / "validated").iterdir())) == 1
    assert validate_imports_jsonschema() is False  # same bytes, same schema: known valid
    path.write_text(GOOD.replace("32768", "abc"))
    bad = run_cli("validate", "-f", str(path), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert bad.returncode == 1 and "is not a token count" in bad.stderr
    path.write_text(GOOD.replace("context_length: 32768", "context_lenght: 32768"))
    bad = run_cli("validate", "-f", str(path), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert bad.returncode == 1 and "unknown key 'context_lenght'" in bad.stderr
    assert len(list((tmp_path / "cache" / "aigo-apply" / "validated").iterdir())) == 1  # invalid files never cached


def test_every_schema_pattern_and_every_compiled_pattern_matches_the_whole_string():
    """Python's `$` also matches before a final newline: every pattern ends in `\\Z` instead."""
    import re
    from pathlib import Path

    import aigo_apply
    from aigo_apply.config.schema import schema

    def patterns(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern":
                    yield value
                if key == "patternProperties":
                    yield from value
                yield from patterns(value)
        elif isinstance(node, list):
            for value in node:
                yield from patterns(value)

    found = list(patterns(schema()))
    assert found and all(not p.endswith("$") for p in found), [p for p in found if p.endswith("$")]
    assert all(re.search(p, "x\n") is None for p in found if p.endswith("\\Z") and re.search(p, "x"))
    source = "\n".join(p.read_text() for p in Path(aigo_apply.__file__).parent.rglob("*.py"))
    assert not re.findall(r"""re\.compile\(r?(["']).*?\$\1\)""", source)


def test_hostile_command_line_values_are_usage_errors_before_anything_is_touched(tmp_path):
    path = write_config(
        tmp_path, "version: 1\nproject: lab\nmodels:\n  m: {source: {path: m}, context_length: 4096, gpus: none}\n"
    )
    state = {"AIGO_STATE_DIR": str(tmp_path / "state")}
    outside = run_cli("destroy", "--project", "../../x", "-y", env=state)
    assert outside.returncode == 64 and "is not a project name" in outside.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "state").exists()  # no lock file written anywhere
    for seconds in ("nan", "inf", "-1"):
        waited = run_cli("apply", "-f", str(path), "-y", "--lock-timeout", seconds, env=state)
        assert waited.returncode == 64 and "is not a number of seconds" in waited.stderr, seconds
    missing = run_cli("export", "m", "-f", str(path), "--out", str(tmp_path / "no" / "such" / "m.baimodel"))
    assert missing.returncode == 1 and "cannot write the definition" in missing.stderr
    assert "Traceback" not in outside.stderr + waited.stderr + missing.stderr


def test_a_plan_file_that_cannot_be_written_is_a_clear_error(tmp_path):
    from aigo_apply.app.saved_plan import save_plan as save
    from aigo_apply.errors import PlanFileError
    from aigo_apply.plan.types import Plan

    with pytest.raises(PlanFileError, match="cannot write the plan file"):
        save(Plan("lab", "aigo.yaml", "sha256:" + "0" * 64, ()), tmp_path / "no" / "such" / "plan.json")
