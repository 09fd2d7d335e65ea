"""What the host says of the paths one run names, as plain data: read once by
observe/host_paths.py and passed in, so that the mount and secret-file policies (config/) and the
desired state (desired/) look paths up here and read nothing themselves. The same file and the
same facts always give the same verdicts.

A path looked up that was not gathered is a bug of the gathering (NotGathered), never read late."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from aigo_apply.config.host_paths import Protected


class NotGathered(LookupError):
    """A path the host facts do not hold: observe/host_paths.py did not gather it (a bug)."""


@dataclass(frozen=True)
class HostPaths:
    """Your home (as written, for `~`, and resolved), every account's home the system knows, the
    folders the environment names (protected), each absolute path named with where it leads
    (`real`: the resolved path, or why it cannot be resolved) and, for a model store, why another
    account could change it (`writers`: its owner and mode, or None when no one else can)."""

    home: Path
    home_real: Path
    homes: tuple[Path, ...] = ()
    protected: tuple[Protected, ...] = ()  # the Hugging Face cache, the state root, the default store
    real: Mapping[Path, Path | str] = field(default_factory=dict)
    writers: Mapping[Path, str | None] = field(default_factory=dict)
    base_dir: Path | None = None  # the config file's folder, resolved (the file's facts only)

    def real_of(self, path: Path) -> Path | str:
        """`path` with every symlink followed, or why it cannot be (observe/host_paths.resolve_or_why)."""
        try:
            return self.real[path]
        except KeyError:
            raise NotGathered(f"no host facts gathered for {path}") from None

    def real_or_written(self, path: Path) -> Path:
        """`real_of`, or the path as written (normalised) when it cannot be resolved: for the host's
        own folders (observe/host_paths.try_resolve, for an absolute path)."""
        real = self.real_of(path)
        return real if isinstance(real, Path) else Path(posixpath.normpath(path))

    def others(self, path: Path) -> str | None:
        """Why another account could change what lands in the store `path` (resolved), or None."""
        try:
            return self.writers[path]
        except KeyError:
            raise NotGathered(f"no owner and mode gathered for {path}") from None

    def mine(self, home: Path) -> frozenset[Path]:
        """`home` as given and resolved (/home may be a link to /var/home): what the policy calls yours."""
        return frozenset({home, self.home_real if home == self.home else self.real_or_written(home)})

    def with_paths(self, other: HostPaths) -> HostPaths:
        """These facts with `other`'s paths added (the file's paths to the host's own folders)."""
        return replace(self, real={**other.real, **self.real}, writers={**other.writers, **self.writers})
