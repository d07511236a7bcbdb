"""The future a background publish returns: a :class:`concurrent.futures.Future` that makes its lock only if
someone waits on it or adds a callback.

A plain Future makes a ``threading.Condition`` when it is made and notifies it when it is resolved: about as
much as the rest of a one-message publish together. Most publish futures are resolved before anyone looks at
them (or never looked at), so this one makes its condition when first needed and is resolved without one if
it has none. It relies on the attributes ``concurrent.futures.Future`` keeps its state in (the same in the
Pythons this package supports); everything else, ``result``, ``wait``, ``as_completed`` and callbacks included,
is the standard Future's.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, PENDING
from typing import Any

from tms_hbase.runtime import green

_CONDITIONS = green.no_wait_lock()
"""Makes a future's condition, and resolves a future that has none, so that neither misses the other."""


class PublishFuture(Future):
    """A Future whose condition is made when first needed; the sender resolves it with :meth:`resolve`."""

    def __init__(self) -> None:  # Future's state without its condition
        self._lazy_condition: threading.Condition | None = None
        self._state = PENDING
        self._result = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property
    def _condition(self) -> threading.Condition:
        condition = self._lazy_condition
        if condition is None:
            with _CONDITIONS:
                if self._lazy_condition is None:
                    self._lazy_condition = threading.Condition()
                condition = self._lazy_condition
        return condition

    @_condition.setter
    def _condition(self, condition: threading.Condition) -> None:
        self._lazy_condition = condition

    def resolve(self, result: object = None, error: BaseException | None = None) -> None:
        """Give the future its result (or ``error``); nothing happens to a future its holder cancelled (the
        messages went on to their outcome all the same)."""
        with _CONDITIONS:
            if self._lazy_condition is None:  # nobody waits and no callback is added: nothing to notify
                if self._state == PENDING:
                    self._result, self._exception, self._state = result, error, FINISHED
                return
        try:
            if error is None:
                self.set_result(result)
            else:
                self.set_exception(error)
        except InvalidStateError:  # cancelled by its holder
            pass

    def result(self, timeout: float | None = None) -> Any:
        if self._state == FINISHED and self._exception is None:  # (set last, after the result)
            return self._result
        return super().result(timeout)

    def done(self) -> bool:
        return self._state == FINISHED or super().done()
