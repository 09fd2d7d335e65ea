"""The apply journal: one JSON line per step (time, run, step, address, container, outcome) in the
project's state directory, so a failed or interrupted apply can be read back step by step."""

from __future__ import annotations

import json
import os
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aigo_apply.errors import AigoError
from aigo_apply.platforms.secrets import redact_data


class Journal:
    def __init__(self, directory: Path):
        self.path = directory / "journal.jsonl"
        self.run = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()

    def record(self, step: str, address: str, outcome: str, **detail: object) -> None:
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "run": self.run,
            "step": step,
            "address": address,
            "outcome": outcome,
            **detail,
        }
        line = json.dumps(redact_data(entry), ensure_ascii=False) + "\n"
        with self._lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise AigoError(
                    f"cannot write the journal {self.path}: {exc.strerror or exc}; "
                    "free space there or set AIGO_STATE_DIR to another folder"
                ) from None
