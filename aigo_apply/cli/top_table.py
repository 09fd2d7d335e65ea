"""top's screen: the models' table and, when there are GPUs, theirs (rich), from app/top.py's rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group, RenderableType
from rich.table import Table


def render(project: str, table: Sequence[Mapping[str, object]], devices: Sequence[Mapping[str, object]]) -> Group:
    """The view as a rich renderable (a table of models, then one of GPUs when there are some)."""
    models = Table(title=f"aigo-apply top: project {project}", title_justify="left")
    for column in ("MODEL", "STATE", "RUNNING", "WAITING", "TOKENS/S", "KV CACHE", "SLEEP"):
        models.add_column(column, justify="left" if column in ("MODEL", "STATE", "SLEEP") else "right")
    for r in table:
        models.add_row(
            _text(r["model"]),
            _text(r["state"]),
            _cell(r["requests_running"]),
            _cell(r["requests_waiting"]),
            _cell(r["tokens_per_second"]),
            _percent(r["kv_cache_usage"]),
            _text(r["sleep"] or "-"),
        )
    parts: list[RenderableType] = [models]
    if devices:
        gpu = Table(title="GPUs", title_justify="left")
        for column in ("GPU", "NAME", "MEMORY USED", "TOTAL"):
            gpu.add_column(column)
        for g in devices:
            gpu.add_row(str(g["index"]), _text(g["name"]), _gib(g["memory_used"]), _gib(g["memory_total"]))
        parts.append(gpu)
    return Group(*parts)


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _text(value: object) -> str | None:
    """A name or a state (app/top.TopRow's texts), shown as it is (None: an empty cell)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"a text, not {value!r}")
    return value


def _percent(value: object) -> str:
    """A fraction (the KV cache's use) as a percentage."""
    if value is None:
        return "-"
    if not isinstance(value, int | float):
        raise TypeError(f"a fraction, not {value!r}")
    return f"{100 * value:.0f}%"


def _gib(value: object) -> str:
    if value is not None and not isinstance(value, int | float):
        raise TypeError(f"a number of bytes, not {value!r}")
    return "-" if value is None else f"{value / 2**30:.1f} GiB"
