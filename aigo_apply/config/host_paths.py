"""What may be mounted into an engine container, and which files a `from_file` secret may name: one
policy of *private places* for both. Never the host's system; never a home folder as a whole nor
what holds one (every home the system knows: each account's in the password database, /root and
each folder in /home); never a credential folder or file, whatever home (or backup of one) it is in
and at any depth (`.ssh`, `.docker`, `.aws`, `.netrc`, a Hugging Face token...: PRIVATE_NAMES);
never the tool's own folders (its state, the Hugging Face cache, the model store as a whole). A
model folder in a home is fine, yours or (as root) another account's; a secret file is read only
from your own home or outside every home (the demanding case of a secret in another account's
home has a plain answer: copy it to ~/.aigo/secrets/NAME, mode 600).

Applied three times to a mount: when the file is validated (located errors), when the desired
state is built (with the host's real folders), and by the Docker adapter just before a container
is made (the path must still be the one planned: no symlink swapped in since); and twice to a
secret file (validation, then on the resolved path when it is read). Pure: what the host says of
each path (where it leads, or why it cannot be followed: a symlink loop, a name too long, a folder
that cannot be searched; who owns a store; every account's home) is read once by
observe/host_paths.py and given here, through config/path_facts.HostPaths, as data.

A config may come from a repository its user does not fully trust, and aigo-apply often runs as
root: a mount or a secret file is the one way a config reaches the host's files, so each is held to
the model's own folder or a secret's own file."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from aigo_apply.config import invisible
from aigo_apply.config.path_text import ancestors, at_or_below, below, home_rules

# Never mounted, nor anything inside them: the system, the container engines' own state, logs.
SYSTEM_DIRS = (
    "/etc",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/run",
    "/var/run",
    "/var/lib/docker",
    "/var/lib/containerd",
    "/var/lib/kubelet",
    # a Kubernetes node's own state (node-local model folders are checked against this list too):
    # etcd (every Secret of a cluster), k3s/RKE2, k0s and minikube's certificates and data, CNI plugins
    "/var/lib/etcd",
    "/var/lib/rancher",
    "/var/lib/k0s",
    "/var/lib/minikube",
    "/var/lib/cni",
    "/var/lib/calico",
    "/opt/cni",
    "/var/snap",
    "/var/lib/containers",
    "/var/log",
    "/var/spool",
    "/var/mail",
    "/var/backups",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
)
# Where udisks mounts removable disks on Fedora, Arch and other systems (/run/media/USER/LABEL):
# inside /run, but a disk's folders as /media and /mnt hold them elsewhere, so neither it nor what
# is below it is a system folder. The rest of /run (/run/secrets, /run/docker.sock, /run/user...) is.
REMOVABLE_MEDIA = "/run/media"
# Folders that hold many other things: never mounted as a whole (a model folder inside is fine).
# Each account's folder of removable disks, /run/media/USER, is one too (`shared_folder`).
SHARED_DIRS = (
    "/var",
    "/var/lib",
    "/var/cache",
    "/var/tmp",
    "/home",
    "/root",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
    REMOVABLE_MEDIA,
    "/tmp",
    "/usr/local",
    "/snap",
    "/nix",
)
# Credentials, keys, tokens and histories, as they are named in a home folder: refused for a mount
# and for a secret file wherever they appear in the path (any home, a backup of one, any depth):
# the folder or file itself and everything below it. One list for mounts and secrets alike. Also
# rootless Podman's and Docker's storage (as /var/lib/containers and /var/lib/docker) and
# ~/.local/state (every account's aigo-apply state, with its router key files; shell histories).
PRIVATE_NAMES = tuple(
    """
    .ssh .gnupg .aws .azure .docker .kube .minikube .config .password-store .pki .terraform.d .oci
    .gcloud .mozilla .thunderbird .vagrant.d .local/share/keyrings .local/share/containers
    .local/share/docker .local/state .cargo/credentials .cargo/credentials.toml .gem/credentials
    .m2/settings.xml .gradle/gradle.properties .netrc .git-credentials .pgpass .my.cnf .npmrc .yarnrc
    .pypirc .boto .s3cfg .databrickscfg .vault-token .dockercfg .Xauthority .ICEauthority
    .huggingface .cache/huggingface huggingface/token huggingface/stored_tokens
    .bash_history .zsh_history .sh_history .history .histfile .python_history .node_repl_history
    .mysql_history .psql_history .sqlite_history .rediscli_history .lesshst .viminfo
    """.split()
)
_PRIVATE_PARTS = tuple(tuple(name.casefold().split("/")) for name in PRIVATE_NAMES)
_PRIVATE_FIRST = frozenset(want[0] for want in _PRIVATE_PARTS)
# Where a home keeps the secret files `from_file` reads (README): never mounted, though read from.
SECRETS_FOLDER = ".aigo/secrets"
# Docker's `-v SRC:DST:MODE` splits on ':' and `--mount` on ','; control characters have no place in a path.
_UNMOUNTABLE = re.compile(r"[:,\x00-\x1f\x7f-\x9f]")
NAME_MAX, PATH_MAX = 255, 4096  # Linux's limits, in bytes, on one name and on a whole path
# Why a path cannot be followed, by the error the system gave.
OS_WHY = {
    errno.ELOOP: "it goes round a loop of symlinks",
    errno.ENAMETOOLONG: f"a name in it is longer than {NAME_MAX} bytes, or the whole path longer than {PATH_MAX}",
    errno.EACCES: "permission denied on the way (a folder in it cannot be searched, or a link in it cannot be read)",
    errno.EPERM: "the operating system does not allow following it",
    errno.ENOTDIR: "a part of it is a file, not a folder",
    errno.EIO: "an input/output error on the way",
}


HF_CACHE = "the Hugging Face cache and its token"
STATE = "aigo-apply's state folder"
STORE = "the whole model store"


@dataclass(frozen=True)
class Protected:
    """A folder of this host that a model mount must not expose: `name` says what it is; with
    `inside_too` nothing below it may be mounted either (else only the folder and its parents).
    A secret file is never read from inside any of them."""

    name: str
    folder: Path
    inside_too: bool = True


def short(path: Path | str) -> str:
    """A path as shown in a message: at most 200 characters."""
    text = str(path)
    return text if len(text) <= 200 else text[:120] + "..." + text[-60:]


def all_homes(mine: frozenset[Path], homes: Iterable[Path]) -> tuple[Path, ...]:
    """Your homes (`mine`: as written and resolved) and every other one (`homes`)."""
    return tuple(mine | set(homes))


_SYSTEM_PATHS = {text: (n, Path(text)) for n, text in enumerate(SYSTEM_DIRS)}
_SHARED_SET = frozenset(SHARED_DIRS)
_ROOT = Path("/")


def system_folder(path: Path) -> Path | None:
    """The system folder `path` is or lies in (the first of SYSTEM_DIRS), or None: one lookup per
    level of the path, not one comparison per system folder. REMOVABLE_MEDIA and what is below it
    are none (a USB disk at /run/media/alice/usb), though inside /run."""
    text = str(path)
    if at_or_below(text, REMOVABLE_MEDIA):
        return None
    found = [_SYSTEM_PATHS[up] for up in ancestors(text) if up in _SYSTEM_PATHS]
    return min(found)[1] if found else None


def shared_folder(path: Path) -> bool:
    """Whether `path` holds many other things and is never mounted as a whole: one of SHARED_DIRS,
    or an account's folder of removable disks (/run/media/alice: every disk it has plugged in)."""
    return str(path) in _SHARED_SET or str(path.parent) == REMOVABLE_MEDIA


def private_place(path: Path, home: Path) -> tuple[str, bool] | None:
    """The credential folder or file `path` is or lies in (~/NAME for your own home, else its full
    path) and whether `path` is below it; None when no part of the path is a PRIVATE_NAMES name."""
    parts = path.parts
    folded = tuple(p.casefold() for p in parts)
    if _PRIVATE_FIRST.isdisjoint(folded):
        return None
    for want in _PRIVATE_PARTS:
        n = len(want)
        for i in range(len(parts) - n + 1):
            if folded[i : i + n] == want:
                place = Path(*parts[: i + n])
                shown = f"~/{place.relative_to(home)}" if below(place, home) else str(place)
                return shown, i + n < len(parts)
    return None


def home_holding(path: Path, homes: Iterable[Path]) -> Path | None:
    """The innermost home folder that is `path` or holds it."""
    best: Path | None = None
    for home in homes:
        if at_or_below(path, home) and (best is None or len(home.parts) > len(best.parts)):
            best = home
    return best


def path_text_problem(text: str) -> str | None:
    """Why a path cannot be given to Docker as a bind mount as written, or None."""
    bad = _UNMOUNTABLE.search(text)
    if bad is None:
        hidden = invisible.hidden_character(text)
        return f"holds {hidden}" if hidden else None
    char = bad.group()
    what = {":": "':' (Docker's mount syntax splits on it)", ",": "',' (Docker's --mount syntax splits on it)"}
    return f"holds {what.get(char, repr(char) + ' (a control character)')}"


def unsafe_mount(
    path: Path,
    home: Path,
    protected: Iterable[Protected] = (),
    store: bool = False,
    homes: Iterable[Path] = (),
    mine: frozenset[Path] | None = None,
    others: str | None = None,
) -> str | None:
    """Why mounting `path` (absolute, resolved) into an engine would expose the host, or None.
    `home` is yours and `mine` it as written and resolved (HostPaths.mine; just `home` when
    None); `homes` every home folder of the host. With `store` (the model store, never mounted
    itself: each download below it is) a shared folder or a home folder is fine, a system or
    private one is not, and `others` is why another account could change it (HostPaths.others)."""
    if path == _ROOT:
        return "the whole filesystem"
    if store and others:
        return others
    mine = frozenset({home}) if mine is None else mine
    if not store and path in mine:
        return "your whole home folder"
    places = tuple(protected)
    for place in places:
        if path == place.folder and not (store and not place.inside_too):
            return f"{place.name} ({place.folder})"
        if place.inside_too and below(path, place.folder):
            return f"inside {place.name} ({place.folder})"
    private = private_place(path, home)
    if private:
        return f"the private folder {private[0]}" + (" (or inside it)" if private[1] else "")
    system = system_folder(path)
    if system:
        return f"the system folder {system}" if path == system else f"inside the system folder {system}"
    if not store and shared_folder(path):
        return f"the shared folder {path} (it holds far more than one model)"
    in_home = home_rules(mine, homes if isinstance(homes, tuple) else tuple(homes), SECRETS_FOLDER)
    found = in_home.first(str(path), store)
    if found:
        return found
    for place in places:
        if not store and below(place.folder, path):
            return f"a folder that holds {place.name}"
    return None


def expand_home(path: str, home: Path) -> Path:
    """`~` and `~/...` against `home`; never another account's `~name` (as HostContext.expand_home)."""
    if path == "~" or path.startswith("~/"):
        return home / path[2:]
    return Path(path)


UNRESOLVABLE_FIX = "point it at the folder or file itself, by a path that exists and that you can read"
