"""top's screen: the models' table and, when there are GPUs, theirs (rich), from app/top.py's rows."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table


def render(project: str, table: list[dict[str, Any]], devices: list[dict[str, Any]]) -> Any:
    """The view as a rich renderable (a table of models, then one of GPUs when there are some)."""
    models = Table(title=f"aigo-apply top: project {project}", title_justify="left")
    for column in ("MODEL", "STATE", "RUNNING", "WAITING", "TOKENS/S", "KV CACHE", "SLEEP"):
        models.add_column(column, justify="left" if column in ("MODEL", "STATE", "SLEEP") else "right")
    for r in table:
        models.add_row(
            r["model"],
            r["state"],
            _cell(r["requests_running"]),
            _cell(r["requests_waiting"]),
            _cell(r["tokens_per_second"]),
            "-" if r["kv_cache_usage"] is None else f"{100 * r['kv_cache_usage']:.0f}%",
            r["sleep"] or "-",
        )
    parts: list[Any] = [models]
    if devices:
        gpu = Table(title="GPUs", title_justify="left")
        for column in ("GPU", "NAME", "MEMORY USED", "TOTAL"):
            gpu.add_column(column)
        for g in devices:
            gpu.add_row(str(g["index"]), g["name"], _gib(g["memory_used"]), _gib(g["memory_total"]))
        parts.append(gpu)
    return Group(*parts)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.1f} GiB"
