"""The reply cache (a reader's opt-in ``cache=``, docs/usage.md): a prompt asked again of
the same model with the same options is answered without a model call.

The key is a SHA-256 of the reader's :meth:`~._reader_base.BaseReader._cache_identity` and the
rendered messages; only validated replies are stored, under the hash. A :class:`ReplyCache`
is a bounded LRU map in memory and, given a file, SQLite on disk (a lock within a
process, SQLite's file locking across processes); a disk error mid-run is logged once
and the cache goes on in memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..engine.records import Reading
from ..errors import CitationParseError, InvalidInputError
from ._prompt import Prompt, Reply

__all__ = ["CACHE_FORMAT", "ReplyCache", "cache_key", "cached_reading", "make_cache", "stored_reading"]

logger = logging.getLogger(__name__)

CACHE_FORMAT = "gold-panning-reply-cache/1"
"""Written into a cache file's ``gp_reply_cache_meta`` table; another value is refused."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS gp_reply_cache_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS gp_reply_cache (key TEXT PRIMARY KEY, reply TEXT NOT NULL)",
)


def cache_key(identity: dict[str, Any], messages: list[dict[str, str]]) -> str:
    """The hex SHA-256 of a reader's identity (model, endpoint, sampling options) and the
    rendered messages, as canonical JSON (sorted keys; values JSON cannot hold are
    written with ``repr``)."""
    text = json.dumps(
        {"identity": identity, "messages": messages}, sort_keys=True, ensure_ascii=False, default=repr
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ReplyCache:
    """Replies by key, in memory and optionally in a SQLite file; shared by every query
    of the readers that hold it.

    Args:
        path: The cache file (created when absent); None: memory only.
        max_entries: Replies kept in memory (least recently used dropped first); the
            file keeps every reply.

    ``hits`` and ``misses`` count this process's lookups.

    Raises:
        InvalidInputError: ``path`` is a folder or another non-regular file, its folder
            does not exist, or it is not a gold-panning reply cache.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, max_entries: int = 10_000) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            raise InvalidInputError(f"max_entries must be an int >= 0, got {max_entries!r}")
        self.path = Path(path) if path is not None else None
        self.max_entries = max_entries
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._conn: sqlite3.Connection | None = _open(self.path) if self.path is not None else None
        self._disk_failed = False

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        return f"ReplyCache({where!r}, hits={self.hits}, misses={self.misses})"

    def count(self, *, hit: bool) -> None:
        """Count one lookup as a hit or a miss."""
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply for ``key`` (a JSON object), or None."""
        with self._lock:
            value = self._memory.get(key)
            if value is not None:
                self._memory.move_to_end(key)
                return value
            if self._conn is None or self._disk_failed:
                return None
            try:
                row = self._conn.execute("SELECT reply FROM gp_reply_cache WHERE key = ?", (key,)).fetchone()
                value = json.loads(row[0]) if row is not None else None
            except (sqlite3.Error, ValueError) as err:
                self._disk_error("read", err)
                return None
            if isinstance(value, dict):
                self._remember(key, value)
                return value
            return None

    def put(self, key: str, reply: dict[str, Any]) -> bool:
        """Store ``reply`` (JSON-ready) under ``key``; False, storing nothing, when it is not."""
        try:
            text = json.dumps(reply, ensure_ascii=False)
        except (TypeError, ValueError):
            logger.debug("reply not cached: it does not serialise to JSON")
            return False
        with self._lock:
            self._remember(key, json.loads(text))
            if self._conn is not None and not self._disk_failed:
                try:
                    with self._conn:
                        self._conn.execute(
                            "INSERT OR REPLACE INTO gp_reply_cache (key, reply) VALUES (?, ?)", (key, text)
                        )
                except sqlite3.Error as err:
                    self._disk_error("write", err)
        return True

    def clear(self) -> None:
        """Drop every stored reply (memory and file) and reset the counts."""
        with self._lock:
            self._memory.clear()
            self.hits = self.misses = 0
            if self._conn is not None and not self._disk_failed:
                with self._conn:
                    self._conn.execute("DELETE FROM gp_reply_cache")

    def close(self) -> None:
        """Close the file (the memory part stays usable)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _remember(self, key: str, value: dict[str, Any]) -> None:
        if self.max_entries == 0:
            return
        self._memory[key] = value
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_entries:
            self._memory.popitem(last=False)

    def _disk_error(self, what: str, err: BaseException) -> None:
        self._disk_failed = True
        logger.warning(
            "reply cache %s: could not %s it (%s); going on with the in-memory cache only",
            self.path,
            what,
            err,
        )


def _open(path: Path) -> sqlite3.Connection:
    """Open (or create) a cache file, refusing anything that is not one."""
    shown = str(path)
    if path.exists() and not path.is_file():
        raise InvalidInputError(
            f"reply cache {shown!r} is not a regular file (a folder, a device or a pipe); "
            "name a file such as 'replies.sqlite'"
        )
    if not path.parent.is_dir():
        raise InvalidInputError(
            f"reply cache {shown!r}: folder {str(path.parent)!r} does not exist; create it first"
        )
    try:
        conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
    except sqlite3.Error as err:
        raise InvalidInputError(f"reply cache {shown!r} could not be opened: {err}") from err
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "gp_reply_cache_meta" not in tables:
            raise InvalidInputError(
                f"reply cache {shown!r} is a SQLite database of something else (tables: "
                f"{', '.join(sorted(tables))}); name a new file for the cache"
            )
        with conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO gp_reply_cache_meta (key, value) VALUES ('format', ?)", (CACHE_FORMAT,)
            )
        row = conn.execute("SELECT value FROM gp_reply_cache_meta WHERE key = 'format'").fetchone()
    except sqlite3.DatabaseError as err:
        conn.close()
        raise InvalidInputError(
            f"reply cache {shown!r} is not a gold-panning reply cache (SQLite says: {err}); "
            "delete it or name another file"
        ) from err
    except InvalidInputError:
        conn.close()
        raise
    if row is None or row[0] != CACHE_FORMAT:
        conn.close()
        raise InvalidInputError(
            f"reply cache {shown!r} has format {row[0] if row else None!r}, not {CACHE_FORMAT!r} "
            "(written by another version?); delete it or name another file"
        )
    return conn


def make_cache(cache: Any) -> ReplyCache | None:
    """Normalise a reader's ``cache=`` option: None/False: no cache; True: a new
    in-memory cache; a path (``str``/``os.PathLike``): a cache in that file; a
    :class:`ReplyCache`: that one (shared with whoever else holds it)."""
    if cache is None or cache is False:
        return None
    if cache is True:
        return ReplyCache()
    if isinstance(cache, ReplyCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        if not str(cache):
            raise InvalidInputError("cache must name a file, got an empty path")
        return ReplyCache(cache)
    raise InvalidInputError(
        f"cache must be None, True (in memory), a file path or a ReplyCache, got {type(cache).__name__}"
    )


# ------------------------------------------------------------------ a reader's readings
def cached_reading(
    cache: ReplyCache, key: str, prompt: Prompt, read: Callable[[Reply, Prompt], Reading]
) -> Reading | None:
    """The reading of the reply cached under ``key`` for ``prompt`` (``read``: the
    reader's reply -> reading; ``attempts`` 0, no tokens, ``cached`` True), counted as a
    hit; None, counted as a miss, when none is stored or it no longer validates."""
    stored = cache.get(key) or {}
    reply = Reply(
        stored.get("text"),
        stored.get("value"),
        stored.get("finish_reason"),
        stored.get("extra") or {},
        stored.get("abstain_p"),
    )
    try:
        reading = read(reply, prompt) if stored else None
    except CitationParseError:  # stored under other validation options: ask again
        reading = None
    cache.count(hit=reading is not None)
    if reading is None:
        return None
    return replace(
        reading,
        attempts=0,
        prompt_tokens=None,
        completion_tokens=None,
        cached=True,
        extra={**reading.extra, "cache": "hit"},
        documents_cut=prompt.documents_cut,
        chars_cut=prompt.chars_cut,
        cut_at=prompt.cut_at,
    )


def stored_reading(cache: ReplyCache, key: str, replies: list[Reply], reading: Reading) -> Reading:
    """``reading`` marked a miss (``cached`` False), the last of ``replies`` stored under
    ``key`` when the reading succeeded."""
    if replies and not reading.failed:
        cache.put(key, asdict(replies[-1]))
    return replace(reading, cached=False)
