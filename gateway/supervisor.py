"""uvicorn's worker supervisor, made to see a worker's death at once.

It pings each worker every 0.5 s over a pipe and waits up to the health check for the answer, while keeping
the worker's end of that pipe open itself: a worker that exits with a ping unanswered (stopped, killed, or
finalizing) gives no end of file, so the supervisor waited the whole health check (30 s) before replacing it,
and ignored SIGTERM as long. :class:`Worker` closes the parent's copy once the worker has its own, so that
wait ends when the worker does. (A module of its own: the worker process unpickles the class by its name.)
"""

from __future__ import annotations

from uvicorn.supervisors import multiprocess


class Worker(multiprocess.Process):
    """uvicorn's worker process whose pipe end the parent closes once the worker holds its own."""

    def start(self) -> None:
        super().start()
        self.child_conn.close()  # uvicorn closes it again when it stops the worker: harmless


def install() -> None:
    """Make uvicorn's supervisor start :class:`Worker` processes (call before ``uvicorn.run``)."""
    multiprocess.Process = Worker  # type: ignore[misc]
