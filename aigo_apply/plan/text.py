"""The human view of a Plan, in Terraform's shape: a legend of the symbols used, one block per
resource with `(because ...)` lines and `path: before -> after` changes, a summary line, and a
distinct "No changes." message. Colours are ANSI codes that the CLI's output strips when it is not writing to a terminal.

It also owns how untrusted text is shown (`printable`, `shown`): names from the command line, a saved
plan or Docker could hold escape sequences, BEL, CR or bidi overrides that a terminal would act on;
every such character is written as a visible escape instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from aigo_apply.config.machine_text import json_text
from aigo_apply.errors import escape_char
from aigo_apply.plan.gpu_ledger import render
from aigo_apply.plan.swap_ledger import render_groups
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


_SGR = re.compile(r"\x1b\[[0-9;]{0,16}m")  # the colour codes `style` and click.style write
SHOWN_MAX = 200  # characters of one untrusted value quoted in a message


def printable(text: str, keep: str = "\n\t", colours: bool = False) -> str:
    """`text` as a terminal shows it without acting on it: each character that is not printable (C0
    and C1 controls such as ESC, BEL, backspace and CR, DEL, Unicode format characters such as the
    bidi overrides, line and paragraph separators, lone surrogates) becomes a visible escape
    (`\\x1b`, `\\u202e`), except those in `keep`. `colours`: this program's own colour codes pass."""
    if text.isprintable():
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isprintable() or char in keep:
            out.append(char)
        elif colours and char == "\x1b" and (sgr := _SGR.match(text, i)):
            out.append(sgr.group())
            i = sgr.end()
            continue
        else:
            out.append(escape_char(char))
        i += 1
    return "".join(out)


def shown(value: object) -> str:
    """One untrusted value (a name, a path) for a message: as it is when it is plain printable text,
    else quoted with every unsafe character escaped (repr), and at most SHOWN_MAX characters."""
    text = str(value)
    if text and len(text) <= SHOWN_MAX and text.isprintable() and text.strip() == text:
        return text
    return repr(text[:SHOWN_MAX]) + ("..." if len(text) > SHOWN_MAX else "")


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
            lines.append(style(f"  x {_t(blocker.id)}: ", fg="red") + _t(blocker.message))
            lines.append(f"      fix: {_t(blocker.remediation)}")
        lines.append("")
    for warning in plan.warnings:
        lines.append(style("Warning: ", fg="yellow", bold=True) + _t(warning))
    ledger = _ledger(plan.gpu_ledger)
    if ledger:
        lines += [style("GPU memory (estimates per GPU):", bold=True)] + ["  " + _t(line) for line in ledger] + [""]
    if plan.swap_groups:
        head = "Swap groups (on-demand models sleep until a request names one; the router wakes it):"
        lines += [style(head, bold=True)] + ["  " + _t(line) for line in render_groups(plan.swap_groups)] + [""]
    changing = [a for a in plan.actions if a.kind in SYMBOLS]
    unchanged = [a for a in plan.actions if a.kind == "noop"]
    if not changing:
        models = len([a for a in unchanged if a.model])
        lines.append(
            style("No changes.", bold=True) + f" The containers of project '{_t(plan.project)}' match "
            f"{_t(plan.config_file)} ({models} model{'s' if models != 1 else ''})."
        )
        lines += _notes(plan.actions)
        return "\n".join(lines)
    used = [k for k in SYMBOLS if any(a.kind == k for a in changing)]
    lines.append(
        f"aigo-apply will perform the following actions for project '{_t(plan.project)}' ({_t(plan.config_file)})."
    )
    lines.append("Symbols: " + "   ".join(_sym(k) + " " + LEGEND[k] for k in used))
    lines.append("")
    for action in changing:
        lines += _block(action)
        if show_diff and action.diff:
            lines += ["      " + _diff_line(_t(line)) for line in action.diff.splitlines()]
        lines.append("")
    counts = plan.summary
    summary = ", ".join(f"{counts[k]} {words}" for k, words in SUMMARY if k != "download" or counts[k])
    lines.append(style("Plan: ", bold=True) + f"{summary}; {len(unchanged)} unchanged.")
    lines += _notes(plan.actions)
    return "\n".join(lines)


def _ledger(rows: tuple[Mapping[str, object], ...]) -> list[str]:

    return render(list(rows)) if rows else []


def _sym(kind: str) -> str:
    symbol, colour, _ = SYMBOLS[kind]
    return style(symbol, fg=colour, bold=True)


def _block(action: Action) -> list[str]:
    _, colour, phrase = SYMBOLS[action.kind]
    address = _t(action.address)
    lines = [style(f"  # {address} {phrase}", bold=True)]
    lines += [f"    (because {_t(reason)})" for reason in action.reasons]
    if action.strategy is not None:
        lines.append(f"    (how: {_t(str(action.strategy))})")
    if action.canary is not None:
        lines.append(f"    ({_t(str(action.canary))})")
    if action.downtime is not None:
        lines.append(f"    ({_t(str(action.downtime))})")
    head = f"  {_sym(action.kind)} {address}"
    if action.container:
        head += style(f"  [{_t(action.container)}]", dim=True)
    lines.append(head)
    for change in action.changes:
        if change.effect == "create":
            lines.append(f"      {style('+', fg='green')} {_t(change.path)}: {_value(change.after)}")
        else:
            lines.append(
                f"      {style('~', fg=colour)} {_t(change.path)}: {_value(change.before)} -> {_value(change.after)}"
            )
    lines += [f"      note: {_t(note)}" for note in action.notes]
    return lines


def _diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return style(line, bold=True)
    colour = {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])
    return style(line, fg=colour) if colour else line


def _notes(actions: tuple[Action, ...]) -> list[str]:
    notes = [f"note: model.{_t(a.model)}: {_t(n)}" for a in actions if a.kind == "noop" for n in a.notes]
    return ([""] + notes) if notes else []


def _value(value: object) -> str:
    if value is None:
        return "(none)"
    return _t(json.dumps(value, ensure_ascii=False))


def _t(text: object) -> str:
    """A value from the config, Docker or a saved plan inside the plan's text: one line, nothing a
    terminal acts on."""
    return printable(str(text), keep="")


def plan_json(plan: Plan) -> str:
    """The plan's versioned JSON, as printed (config/machine_text: no CI command in it)."""
    return json_text(plan.to_dict(), indent=2)
