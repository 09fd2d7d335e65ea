"""What a platform lacks, declared once per platform, and the one place that refuses a command needing it.

Every platform runs the one loop (plan, apply, destroy, status, logs: app/converge.py); a few commands
and options work on this machine's Docker only for now. Each platform declares what it lacks (LACKS, by
the name `platform:` or --platform gives it, and as each platform's `lacks`), and `refuse_lacking` says
so in the words the user has always read, so that no use case asks which platform it runs on (no
isinstance, no test of a platform's name)."""

from __future__ import annotations

from typing import Literal, NoReturn

from aigo_apply.errors import AigoError, UsageProblem, shown_path

# this_host: the commands that act on this machine's Docker only (readiness, render --as docker, image,
# models, watch); top, bench: reading the engines here; saved_plan: plan --out; lock: apply --locked.
Capability = Literal["this_host", "top", "bench", "saved_plan", "lock"]

LACKS: dict[str, frozenset[Capability]] = {
    "docker": frozenset(),
    "kubernetes": frozenset({"this_host", "top", "bench", "saved_plan", "lock"}),
}

_REFUSALS: dict[Capability, str] = {
    "top": "top: aigo-apply reads Docker's engines only for now (on a cluster: `kubectl top pods`)",
    "bench": "bench: aigo-apply measures Docker's engines only for now",
    "saved_plan": "--out: a saved plan is for Docker only for now (nothing was saved)",
    "lock": "--locked: aigo.lock pins what this machine runs; on a cluster it is not used",
}


def refuse_lacking(lacks: frozenset[Capability], capability: Capability, file: str = "") -> None:
    """Nothing when the platform has `capability` (it is not in what the platform lacks); otherwise its
    refusal."""
    if capability in lacks:
        refuse(capability, file)


def refuse(capability: Capability, file: str = "") -> NoReturn:
    """The one place a missing capability is refused: exit 64, or 1 for a file for a cluster given to a
    command of this machine's Docker (`file` names it)."""
    if capability == "this_host":
        raise AigoError(
            f"{shown_path(file)} deploys to Kubernetes (platform: kubernetes), and this command works on Docker only; "
            "on a cluster use validate, plan, apply, status, destroy and `render --as kubernetes` "
            "(those four also take --platform docker, to act on this machine's Docker instead)"
        )
    raise UsageProblem(_REFUSALS[capability])
