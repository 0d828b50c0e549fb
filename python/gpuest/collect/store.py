"""The finished rows: an append-only JSON-lines file, one row per finished job.

A row is appended and fsync'd as soon as its job ends, so killing the collector at any
moment loses no finished row; a restart reads the ids already there and skips those
jobs. A line cut short by a kill mid-write (no newline at the end of the file) was
never a finished row: it is cut off on open, and its job runs again.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Iterator, List


class StoreError(ValueError):
    """The rows file is damaged somewhere other than a cut last line."""


class RowStore:
    def __init__(self, path: str):
        self.path = path
        self._ids: Dict[str, int] = {}
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._drop_cut_line()
        for number, row in enumerate(self._read(), 1):
            if row["id"] in self._ids:
                raise StoreError(f"{path} line {number}: row {row['id']} is already on line "
                                 f"{self._ids[row['id']]}")
            self._ids[row["id"]] = number

    def _drop_cut_line(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
                f.flush()
                os.fsync(f.fileno())

    def _read(self) -> Iterator[dict]:
        if not os.path.exists(self.path):
            return
        with open(self.path) as f:
            for number, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                    row["id"]
                except (ValueError, KeyError, TypeError) as e:
                    raise StoreError(f"{self.path} line {number}: not a row "
                                     f"({type(e).__name__}: {e})") from None
                yield row

    def finished(self, row_id: str) -> bool:
        return row_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def rows(self) -> List[dict]:
        return list(self._read())

    def get(self, row_id: str) -> dict:
        for row in self._read():
            if row["id"] == row_id:
                return row
        raise KeyError(row_id)

    def append(self, row: dict) -> None:
        """Adds a finished row, durably (flushed and fsync'd) before returning."""
        if row["id"] in self._ids:
            raise StoreError(f"row {row['id']} is already in {self.path}")
        line = json.dumps(row, separators=(",", ":")) + "\n"
        # The whole line in append mode: a kill leaves it whole or cut (and then cut off
        # on the next open); one collector writes the file at a time.
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = memoryview(line.encode())
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # the new file's directory entry is durable too
            dir_fd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._ids[row["id"]] = len(self._ids) + 1
