"""`aigo-apply render ALIAS --as docker-run`: the exact `docker run` command line that makes the same
container apply makes (same labels, so plan sees it as its own), with secrets as shell references
(`"$HF_TOKEN"`, `"$(cat FILE)"`), never their values. Pure: for debugging and for sharing.

A POSIX shell reads every word back as the value apply passes: each is written by
config/machine_text.shell_word (quoted, no line a CI runner takes for a command), and a secret file
under `~/` is read from `"$HOME"/...`, the home apply expands it against (quotes would keep a `~`
from expanding, and the secret would be set empty)."""

from __future__ import annotations

from aigo_apply.config.machine_text import shell_word
from aigo_apply.desired.types import CONFINED_CAPS, ContainerSpec, SecretRef


def secret_word(ref: SecretRef) -> str:
    """The shell's word for a secret's value: `"$NAME"`, or the file's text (`$(cat ...)` drops the
    line feeds that end it; apply's read drops white space around the value too)."""
    if ref.kind == "from_env":
        return f'"${ref.target}"'
    path = ref.target
    where = '"$HOME"/' + shell_word(path[2:]) if path.startswith("~/") else shell_word(path)
    return f'"$(cat {where})"'


def docker_run(container: ContainerSpec) -> str:
    q = shell_word
    args: list[str] = ["docker run -d", f"--name {q(container.name)}"]
    if container.network_mode != "bridge":
        args.append(f"--network {q(container.network_mode)}")
    args.append(f"--restart {q(container.restart_policy)}")
    if container.ipc_mode != "private":
        args.append(f"--ipc {q(container.ipc_mode)}")
    if container.shm_size is not None:
        args.append(f"--shm-size {container.shm_size}")
    if container.cpu_shares is not None:
        args.append(f"--cpu-shares {container.cpu_shares}")
    if container.logs is not None:  # apply's rotation: the driver too, whatever the daemon's default is
        options = container.logs.log_config()
        args.append(f"--log-driver {q(options['type'])}")
        args += [f"--log-opt {q(f'{k}={v}')}" for k, v in options["config"].items()]
    if container.confined:
        args.append("--cap-drop ALL " + " ".join(f"--cap-add {c}" for c in CONFINED_CAPS))
        args.append("--security-opt no-new-privileges")
    if container.user:
        args.append(f"--user {q(container.user)}")
    if container.gpus == "all":
        args.append("--gpus all")
    elif container.gpus != "none":
        args.append("--gpus " + q('"device=' + ",".join(map(str, container.gpus)) + '"'))
    if container.host_port is not None:
        args.append(f"-p {q(f'{container.host_ip}:{container.host_port}:{container.container_port}')}")
    for mount in container.mounts:
        args.append(f"-v {q(f'{mount.source}:{mount.target}' + (':ro' if mount.read_only else ''))}")
    for name, value in container.env:
        if isinstance(value, SecretRef):
            args.append(f"-e {q(name)}={secret_word(value)}")
        else:
            args.append(f"-e {q(f'{name}={value}')}")
    for key, value in sorted(container.labels.items()):
        args.append(f"--label {q(f'{key}={value}')}")
    entry_args: list[str] = []
    if container.entrypoint is not None:  # `docker run --entrypoint` takes one program; its arguments follow the image
        args.append(f"--entrypoint {q(container.entrypoint[0])}")
        entry_args = list(container.entrypoint[1:])
    args.append(q(container.image) + "".join(f" {q(a)}" for a in entry_args))
    command = list(container.command)
    while command:  # a flag and its value on one line
        arg = command.pop(0)
        if arg.startswith("-") and command and not command[0].startswith("-"):
            arg = f"{q(arg)} {q(command.pop(0))}"
        else:
            arg = q(arg)
        args.append(arg)
    return " \\\n  ".join(args)
