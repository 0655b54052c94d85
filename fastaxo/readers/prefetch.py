"""The reader's background thread: a generator run into a queue bounded by items and bytes."""

from __future__ import annotations

import collections
import threading
from collections.abc import Generator
from typing import Any

__all__ = ["Prefetch"]


class Prefetch:
    """Runs a generator in a thread into a queue bounded by items and bytes."""

    def __init__(self, gen: Generator[Any, None, None], depth: int, max_bytes: int, size=None):
        self.gen, self.depth, self.max_bytes = gen, depth, max_bytes
        self.size = size or (lambda item: item[0].nbytes if item[0] is not None else 0)
        self.q: collections.deque = collections.deque()
        self.bytes = 0
        self.cv = threading.Condition()
        self.stop = False
        self.done = False
        self.thread = threading.Thread(target=self._run, name="fastaxo-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for item in self.gen:
                nb = self.size(item)
                with self.cv:
                    while not self.stop and self.q and (len(self.q) >= self.depth
                                                        or self.bytes + nb > self.max_bytes):
                        self.cv.wait()
                    if self.stop:
                        return
                    self.q.append((item, nb))
                    self.bytes += nb
                    self.cv.notify_all()
        except BaseException as e:  # delivered in order, after the batches before it
            with self.cv:
                self.q.append((e, 0))
        finally:
            try:
                self.gen.close()
            finally:
                with self.cv:
                    self.done = True
                    self.cv.notify_all()

    def get(self):
        with self.cv:
            while not self.q and not self.done:
                self.cv.wait()
            if not self.q:
                return None
            item, nb = self.q.popleft()
            self.bytes -= nb
            self.cv.notify_all()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        with self.cv:
            self.stop = True
            self.q.clear()
            self.bytes = 0
            self.cv.notify_all()
        if self.thread is not threading.current_thread():
            self.thread.join()
