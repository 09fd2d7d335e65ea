"""The human view of a Plan, in Terraform's shape: a legend of the symbols used, one block per
resource with `(because ...)` lines and `path: before -> after` changes, a summary line, and a
distinct "No changes." message. Colours are ANSI codes that the CLI's output strips when it is not writing to a terminal.
"""

from __future__ import annotations

import json
from typing import Any

from aigo_apply.plan.gpu_ledger import render
from aigo_apply.plan.types import Action, Plan

SYMBOLS = {  # kind -> (symbol, colour, phrase)
    "pull": ("v", "cyan", "will be pulled"),
    "download": ("v", "cyan", "will be downloaded"),
    "create": ("+", "green", "will be created"),
    "recreate": ("-/+", "yellow", "will be replaced"),
    "start": (">", "cyan", "will be started"),
    "remove": ("-", "red", "will be removed"),
    "reload_router": ("~", "yellow", "will be reloaded"),
}
LEGEND = {
    "pull": "pull",
    "download": "download",
    "create": "create",
    "recreate": "replace",
    "start": "start",
    "remove": "remove",
    "reload_router": "reload",
}
SUMMARY = (
    ("pull", "to pull"),
    ("download", "to download"),
    ("create", "to create"),
    ("recreate", "to replace"),
    ("start", "to start"),
    ("remove", "to remove"),
    ("reload_router", "to reload"),
)


_COLOURS = {"red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35, "cyan": 36}


def style(text: str, fg: str | None = None, bold: bool = False, dim: bool = False) -> str:
    """ANSI styling (the codes click.style writes), without importing click into the pure core."""
    codes = ([_COLOURS[fg]] if fg else []) + ([1] if bold else []) + ([2] if dim else [])
    return "".join(f"\x1b[{c}m" for c in codes) + text + "\x1b[0m" if codes else text


def plan_text(plan: Plan, show_diff: bool = False) -> str:
    lines: list[str] = []
    if plan.blockers:
        lines.append(style(f"The plan is blocked ({len(plan.blockers)}):", fg="red", bold=True))
        for blocker in plan.blockers:
            lines.append(style(f"  x {blocker.id}: ", fg="red") + blocker.message)
            lines.append(f"      fix: {blocker.remediation}")
        lines.append("")
    for warning in plan.warnings:
        lines.append(style("Warning: ", fg="yellow", bold=True) + warning)
    ledger = _ledger(plan.gpu_ledger)
    if ledger:
        lines += [style("GPU memory (estimates per GPU):", bold=True)] + ["  " + line for line in ledger] + [""]
    changing = [a for a in plan.actions if a.kind in SYMBOLS]
    unchanged = [a for a in plan.actions if a.kind == "noop"]
    if not changing:
        models = len([a for a in unchanged if a.model])
        lines.append(
            style("No changes.", bold=True) + f" The containers of project '{plan.project}' match "
            f"{plan.config_file} ({models} model{'s' if models != 1 else ''})."
        )
        lines += _notes(plan.actions)
        return "\n".join(lines)
    used = [k for k in SYMBOLS if any(a.kind == k for a in changing)]
    lines.append(f"aigo-apply will perform the following actions for project '{plan.project}' ({plan.config_file}).")
    lines.append("Symbols: " + "   ".join(_sym(k) + " " + LEGEND[k] for k in used))
    lines.append("")
    for action in changing:
        lines += _block(action)
        if show_diff and action.diff:
            lines += ["      " + _diff_line(line) for line in action.diff.splitlines()]
        lines.append("")
    counts = plan.summary
    summary = ", ".join(f"{counts[k]} {words}" for k, words in SUMMARY if k != "download" or counts[k])
    lines.append(style("Plan: ", bold=True) + f"{summary}; {len(unchanged)} unchanged.")
    lines += _notes(plan.actions)
    return "\n".join(lines)


def _ledger(rows: tuple[dict[str, Any], ...]) -> list[str]:

    return render(list(rows)) if rows else []


def _sym(kind: str) -> str:
    symbol, colour, _ = SYMBOLS[kind]
    return style(symbol, fg=colour, bold=True)


def _block(action: Action) -> list[str]:
    _, colour, phrase = SYMBOLS[action.kind]
    lines = [style(f"  # {action.address} {phrase}", bold=True)]
    lines += [f"    (because {reason})" for reason in action.reasons]
    head = f"  {_sym(action.kind)} {action.address}"
    if action.container:
        head += style(f"  [{action.container}]", dim=True)
    lines.append(head)
    for change in action.changes:
        if change.effect == "create":
            lines.append(f"      {style('+', fg='green')} {change.path}: {_value(change.after)}")
        else:
            lines.append(
                f"      {style('~', fg=colour)} {change.path}: {_value(change.before)} -> {_value(change.after)}"
            )
    lines += [f"      note: {note}" for note in action.notes]
    return lines


def _diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return style(line, bold=True)
    colour = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
    return style(line, fg=colour) if colour else line


def _notes(actions: tuple[Action, ...]) -> list[str]:
    notes = [f"note: model.{a.model}: {n}" for a in actions if a.kind == "noop" for n in a.notes]
    return ([""] + notes) if notes else []


def _value(value: Any) -> str:
    if value is None:
        return "(none)"
    return json.dumps(value, ensure_ascii=False)


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=2)
