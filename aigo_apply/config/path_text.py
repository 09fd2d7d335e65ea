"""Path comparisons by text, for the private-places policy (config/host_paths.py): a plan checks
every mount against the system folders and every home of the host, so each check is a comparison
of strings or a set lookup per level of the path, never a Path built per folder or a loop over
every folder of a list (a host may list hundreds of accounts)."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator
from pathlib import Path, PurePath


def below(path: Path, folder: Path) -> bool:
    """`path` lies strictly inside `folder` (both absolute), as `folder in path.parents` says, by
    comparing text: Path.parents builds a Path per level, and a plan checks every mount this way."""
    inner, outer = str(path), str(folder)
    return inner != outer and inner.startswith(outer if outer.endswith("/") else outer + "/")


def at_or_below(path: Path | str, folder: Path | str) -> bool:
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def ancestors(text: str) -> Iterator[str]:
    """`text` and each folder above it, as text: among texts not ending in '/' (every folder a rule
    names), exactly those F for which `at_or_below(text, F)` holds, so a set lookup per level
    replaces a loop over a list."""
    yield text
    at = text.find("/", 1)
    while at != -1:
        yield text[:at]
        at = text.find("/", at + 1)


class HomeRules:
    """The home-folder rules of a mount for one set of homes, indexed by text: whether a path lies
    in a home's secrets folder, is another account's home or holds homes is a lookup per level of
    the path (and a bisection for the homes below it). The first home of `order` a rule holds for
    gives the message, as a loop over `order` trying the rules in turn would."""

    def __init__(self, order: tuple[Path, ...], secrets_folder: str):
        self.order = order
        self.secrets = [Path(f"{each}/{secrets_folder}") for each in order]
        self.by_secrets = {str(folder): n for n, folder in reversed(list(enumerate(self.secrets)))}
        # `path == home` holds only between paths (a home given as text never equals a Path)
        self.by_home = {str(each): n for n, each in reversed(list(enumerate(order))) if isinstance(each, PurePath)}
        self.texts = sorted((str(each), n) for n, each in enumerate(order))

    def first(self, text: str, store: bool) -> str | None:
        """Why mounting `text` (a resolved path as text) is refused by a home rule, or None. With
        `store` (the model store) only a secrets folder is refused."""
        hits = [self.by_secrets[up] for up in ancestors(text) if up in self.by_secrets]
        if not store:
            if text in self.by_home:
                hits.append(self.by_home[text])
            inside = text if text.endswith("/") else text + "/"
            at = bisect.bisect_left(self.texts, (inside,))
            while at < len(self.texts) and self.texts[at][0].startswith(inside):
                if self.texts[at][0] != text:
                    hits.append(self.texts[at][1])
                at += 1
        if not hits:
            return None
        each, secrets = self.order[min(hits)], self.secrets[min(hits)]
        if at_or_below(text, secrets):  # the rules in the order the loop tried them, for that home
            return f"the secrets folder {secrets} (where from_file secrets are kept)"
        if text == str(each) and isinstance(each, PurePath):
            return f"the home folder {each} of another account"
        return f"a folder that holds home folders ({each} is inside it)"


@functools.lru_cache(maxsize=32)
def home_rules(mine: frozenset[Path], others: tuple[Path, ...], secrets_folder: str) -> HomeRules:
    """The rules for your homes (`mine`) and the others, yours first (the expected message). Keyed
    by the homes themselves, so another list (a test's, or known_homes() read again) gets its own."""
    return HomeRules(tuple(sorted(mine | set(others), key=lambda h: h not in mine)), secrets_folder)
