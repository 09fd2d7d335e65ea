"""The names aigo-apply derives from a project and an alias, and the rule that keeps them apart.

Docker names are `aigo-{project}-{alias}` for an engine, `aigo-{project}-router` for the router,
`aigo-{project}-cache` for the cache volume, `{engine name}-aigo-previous` for the container a
replace keeps until the new one serves, and `{engine name}-aigo-next` for the new engine a parallel
replace starts beside the serving one (desired/engines/, platforms/docker/model_steps.py; a unit test holds
these copies equal). Projects and aliases may both contain '-', so an alias must not end like a name
the tool gives its own resources: alias `router` would be this project's router, alias `x-router`
project `p-x`'s router (`aigo-p-x-router` both), alias `m1-aigo-previous` the kept copy of `m1`.
Two engines of different projects (`p` + `x-m`, `p-x` + `m`) can still meet on one name; the plan
refuses that as a name conflict, because only the daemon knows which other projects exist. The
cache volume's name cannot meet a container's: volumes and containers are named apart.
"""

from __future__ import annotations

import re

# A model's or an adapter's alias: the name clients send as `model`.
ALIAS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
PREFIX = "aigo-"
ROUTER_WORD = "router"
BACKUP_SUFFIX = "-aigo-previous"
NEXT_SUFFIX = "-aigo-next"


def container_name(project: str, alias: str) -> str:
    return f"{PREFIX}{project}-{alias}"


def _reserved(project: str) -> dict[str, str]:
    """Each ending the tool keeps for itself, with what it names (an example from this project)."""
    return {
        "-" + ROUTER_WORD: f"a router's container (project '{project}-x' has {container_name(project, 'x-router')})",
        BACKUP_SUFFIX: "the copy of a container that a replace keeps "
        f"(a replace of model 'm' keeps {container_name(project, 'm')}{BACKUP_SUFFIX})",
        NEXT_SUFFIX: "the new engine a parallel replace starts beside the serving one "
        f"(a replace of model 'm' starts {container_name(project, 'm')}{NEXT_SUFFIX})",
    }


def reserved_problem(project: str, alias: str) -> str | None:
    """Why the engine container of `alias` could take a name the tool reserves, if it could."""
    name = container_name(project, alias)
    for ending, what in _reserved(project).items():
        if name.lower().endswith(ending):
            return (
                f"alias '{alias}' would name its container {name}, which ends in '{ending}' like the name of "
                f"{what}; aigo-apply keeps that ending for its own containers, of any project: rename the model"
            )
    return None
