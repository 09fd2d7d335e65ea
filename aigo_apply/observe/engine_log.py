"""What an engine's log says went wrong: the line a person should read first when a start failed.

vLLM's start-up failures end in a traceback of the API server that only points back
("RuntimeError: Engine core initialization failed. See root cause above."), while the cause (a CUDA
or NCCL error, an out-of-memory in the profiling run, a refused argument) was printed earlier by the
engine-core process, often more than the last 20 lines before. So the root cause is the last
exception or error line that does not merely point elsewhere. SGLang and llama.cpp print
`ERROR`-level and `error:` lines the same way. Pure: a function of the lines."""

from __future__ import annotations

import re

# `ValueError: ...`, `torch.OutOfMemoryError: ...`, `RuntimeError: CUDA error: ...`, `SystemExit: 1`, also
# after a logger's prefix (`(EngineCore_DP0 pid=77) ERROR 12-06 16:40:00 [core.py:700] ValueError: ...`)
_EXCEPTION = re.compile(r"(?:^|[\s\]])(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt):\s*\S")
# a logger's error line (`ERROR 12-06 16:40:00 [core.py:700] ...`, `[ERROR] ...`, llama.cpp's `error: ...`)
_ERROR_LINE = re.compile(r"(?:^|[\s\[(])(?:ERROR|CRITICAL|FATAL)\b|^\s*(?:error|fatal):", re.IGNORECASE)
# lines that only point at another line, or say a process ended
_POINTERS = re.compile(
    r"see (?:the )?root cause above|see above|see the (?:log|error) above|failed core proc|"
    r"^\s*(?:Traceback \(most recent call last\)|The above exception was the direct cause)",
    re.IGNORECASE,
)
MAX_SHOWN = 400  # characters of the line a summary shows


def root_cause(lines: list[str]) -> str | None:
    """The line that says why the engine failed: the last exception line that does not only point at
    another, else the last error-level log line; None when the log says neither."""
    fallback = None
    for line in reversed(lines):
        text = line.strip()
        if not text or _POINTERS.search(text):
            continue
        if _EXCEPTION.search(text):
            return text[:MAX_SHOWN]
        if fallback is None and _ERROR_LINE.search(text):
            fallback = text[:MAX_SHOWN]
    return fallback
