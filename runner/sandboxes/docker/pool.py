"""A warm pool: sandboxes made ahead of time, so a session does not wait for one.

A daemon thread keeps ``size`` ready items, made by a blocking ``make()``;
``claim()`` hands one out at once (or None when the pool is empty) and wakes
the thread to make a replacement.  Each item goes to exactly one claimer.
Items idle longer than ``max_idle_seconds`` are discarded and replaced (or,
with ``replace_idle=False``, discarded and the pool closes: a seeded pool
nobody claims from stops costing containers), and ``close()`` (also run at
interpreter exit) discards whatever is still idle.
The thread knows nothing of event loops, so one pool serves any of them.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
logger = logging.getLogger("runner")

_MAX_BACKOFF_SECONDS = 30.0


class WarmPool(Generic[T]):
    def __init__(
        self,
        size: int,
        make: Callable[[], T],
        discard: Callable[[T], None],
        *,
        max_idle_seconds: float = 600.0,
        replace_idle: bool = True,
        name: str = "warm-pool",
    ) -> None:
        if size < 1:
            raise ValueError("a warm pool needs a size of at least 1")
        self.size = size
        self._make = make
        self._discard = discard
        self.max_idle_seconds = max_idle_seconds
        self.replace_idle = replace_idle
        self._ready: deque[tuple[float, T]] = deque()
        self._condition = threading.Condition()
        self._closed = False
        self.failures = 0
        self._thread = threading.Thread(target=self._fill, name=name, daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        with self._condition:
            return len(self._ready)

    def claim(self) -> T | None:
        """A ready item, or None if none is ready right now.  Never blocks for long."""
        with self._condition:
            item = self._ready.popleft()[1] if self._ready else None
            self._condition.notify_all()
        return item

    def wait_ready(self, timeout: float) -> bool:
        """Block until the pool is full (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while len(self._ready) < self.size and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(left)
            return not self._closed

    def close(self, timeout: float = 120.0) -> None:
        """Stop making items, discard the idle ones, and wait (up to ``timeout``)
        for an item being made right now, which is then discarded too."""
        with self._condition:
            self._closed = True
            idle = [item for _, item in self._ready]
            self._ready.clear()
            self._condition.notify_all()
        atexit.unregister(self.close)  # a closed pool is not kept alive until exit
        for item in idle:
            self._discard_quietly(item)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _discard_quietly(self, item: T) -> None:
        try:
            self._discard(item)
        except Exception as exc:
            logger.warning("discarding a pooled sandbox failed: %s", exc)

    def _fill(self) -> None:
        backoff = 1.0
        while True:
            with self._condition:
                while not self._closed and len(self._ready) >= self.size:
                    stale = (
                        self._ready and time.monotonic() - self._ready[0][0] > self.max_idle_seconds
                    )
                    if stale:
                        break
                    self._condition.wait(timeout=min(self.max_idle_seconds, 60))
                if self._closed:
                    return
                expired = []
                while self._ready and time.monotonic() - self._ready[0][0] > self.max_idle_seconds:
                    expired.append(self._ready.popleft()[1])
                retire = bool(expired) and not self.replace_idle
                if retire:  # nobody claimed for max_idle_seconds: stop here
                    self._closed = True
                    expired += [item for _, item in self._ready]
                    self._ready.clear()
                    self._condition.notify_all()
            for item in expired:
                self._discard_quietly(item)
            if retire:
                atexit.unregister(self.close)
                return
            try:
                item = self._make()
            except Exception as exc:
                self.failures += 1
                logger.warning("warm pool: making a sandbox failed (%s); retrying", exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_SECONDS)
                continue
            backoff = 1.0
            with self._condition:
                if self._closed:
                    closed = True
                else:
                    closed = False
                    self._ready.append((time.monotonic(), item))
                    self._condition.notify_all()
            if closed:
                self._discard_quietly(item)
                return
