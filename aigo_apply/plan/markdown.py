"""`plan -o markdown`: the plan as a compact Markdown summary for a pull request comment: one status
line, blockers and warnings, and the changes in a collapsible <details> block.

Every name, reason and value comes from the config or the machine, so none of it may become
Markdown or HTML: each character that could start markup (`*`, `_`, `[`, `<`, `|`, `@` mentions, ...)
is written as an HTML character reference, after plan.text.printable has escaped control and format
characters, and no autolink can form in it (`www.`, `http://`, e-mail addresses, @mentions, #refs).
The result stays under GitHub's comment size limit."""

from __future__ import annotations

import json
import re

from aigo_apply.plan.text import LEGEND, SUMMARY, SYMBOLS, printable
from aigo_apply.plan.types import Action, Plan

MAX_CHARS = 60_000  # a GitHub comment holds at most 65,536 characters
_SAFE = re.compile(r"[A-Za-z0-9 .,/=+;%()?-]")
_UNLINK = re.compile(r"(?i)www(?=\.)|:(?=//)|[@#]")  # each gets a zero-width space after it
_BREAK = "\x00"  # stands for it until the characters are written (printable() has escaped every NUL)


def md(text: object) -> str:
    """Untrusted text as inert Markdown: one line, every markup character as `&#N;`, and no autolink:
    a zero-width space (&#8203;) breaks each `www.`, `://`, `@` (e-mail, mentions) and `#` (issue
    references), which GitHub would link even when written as character references (it links the
    text it renders, after they are read)."""
    shown = _UNLINK.sub(lambda m: m.group() + _BREAK, printable(str(text), keep=""))
    return "".join(
        "&#8203;" if c == _BREAK else c if _SAFE.match(c) or (c.isalnum() and c.isprintable()) else f"&#{ord(c)};"
        for c in shown
    )


def _code(value: object) -> str:
    return "<code>" + md("(none)" if value is None else json.dumps(value, ensure_ascii=False)) + "</code>"


def plan_markdown(plan: Plan) -> str:
    """The plan for a pull request: status first, then the changes folded away."""
    changing = [a for a in plan.actions if a.kind in SYMBOLS]
    unchanged = sum(1 for a in plan.actions if a.kind == "noop")
    where = f"project <code>{md(plan.project)}</code> (<code>{md(plan.config_file)}</code>)"
    lines = [f"### aigo-apply plan: {where}", ""]
    if plan.blockers:
        lines.append(f"**Blocked** ({len(plan.blockers)}): apply will refuse this plan.")
        lines += [f"- :x: <code>{md(b.id)}</code>: {md(b.message)} (fix: {md(b.remediation)})" for b in plan.blockers]
        lines.append("")
    lines += [f"- :warning: {md(w)}" for w in plan.warnings] + ([""] if plan.warnings else [])
    if not changing:
        models = sum(1 for a in plan.actions if a.model)
        lines.append(f"**No changes.** The containers match the file ({models} model{'s' if models != 1 else ''}).")
        return _bounded(lines, [])
    counts = plan.summary
    summary = ", ".join(f"{counts[k]} {words}" for k, words in SUMMARY if counts[k])
    lines.append(f"**Plan:** {summary}; {unchanged} unchanged.")
    lines.append("")
    details = [
        "<details><summary>" + f"{len(changing)} change{'s' if len(changing) != 1 else ''}" + "</summary>",
        "",
    ]
    for action in changing:
        details += _action(action)
    details += ["", "</details>"]
    return _bounded(lines, details)


def _action(action: Action) -> list[str]:
    symbol, _, phrase = SYMBOLS[action.kind]
    because = "; ".join(md(reason) for reason in action.reasons)
    lines = [
        f"- <code>{md(symbol)}</code> **{md(action.address)}** {md(phrase)} ({md(LEGEND[action.kind])}: {because})"
    ]
    for change in action.changes:
        if change.effect == "create":
            lines.append(f"  - <code>{md(change.path)}</code>: {_code(change.after)}")
        else:
            lines.append(f"  - <code>{md(change.path)}</code>: {_code(change.before)} &#8594; {_code(change.after)}")
    if action.strategy is not None:
        lines.append(f"  - how: {md(str(action.strategy))}")
    if action.canary is not None:
        lines.append(f"  - {md(str(action.canary))}")
    if action.downtime is not None:
        lines.append(f"  - {md(str(action.downtime))}")
    lines += [f"  - note: {md(note)}" for note in action.notes]
    return lines


def _bounded(head: list[str], details: list[str]) -> str:
    """Head and details, the details cut (and said so) where the whole would not fit in a comment."""
    text = "\n".join(head)
    kept: list[str] = []
    size = len(text)
    for n, line in enumerate(details):
        if size + len(line) + 200 > MAX_CHARS and n < len(details) - 1:
            kept += [
                f"- ... {len(details) - n - 1} more lines cut: run `aigo-apply plan` for all of it",
                "",
                "</details>",
            ]
            break
        kept.append(line)
        size += len(line) + 1
    return "\n".join(head + kept) + "\n"
