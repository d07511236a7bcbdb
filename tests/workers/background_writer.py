"""A pipelining writer process for the background publisher's crash test: threads publish one message per call
through one BackgroundPublisher until the process is killed.

Usage: python -m tests.workers.background_writer TOPIC THREADS LOG_FILE
Thread ``t`` publishes ``t:i`` for i = 0, 1, 2, … one message per ``publish`` call without waiting, in windows of
1 to 200 calls. It logs ``sent t first last`` once a window is queued and ``stored t first last`` once all its
futures said stored, so the log lists exactly the messages the publisher said were stored, and whether a
thread had publishes in flight (a window sent and not stored yet).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback

from tms_hbase import BackgroundPublisher, MessagingClient, TopicId

WINDOW = 200


def main() -> None:
    topic, threads, log_path = TopicId.parse(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    lock = threading.Lock()
    with MessagingClient(create_tables=False) as client, open(log_path, "a") as log:
        publisher = BackgroundPublisher(client, on_full="block", linger_seconds=0.002)

        def note(line: str) -> None:
            with lock:
                log.write(line)
                log.flush()  # in the kernel's hands: a SIGKILL of this process does not lose it

        def produce(t: int) -> None:
            try:
                first = 0
                while True:
                    last = first + first % WINDOW
                    futures = [publisher.publish(topic, [f"{t}:{i}".encode()]) for i in range(first, last + 1)]
                    note(f"sent {t} {first} {last}\n")
                    if any(future.result(timeout=300) is None for future in futures):
                        raise RuntimeError("the publisher dropped a message")
                    note(f"stored {t} {first} {last}\n")
                    first = last + 1
            except BaseException:
                traceback.print_exc()
                os._exit(1)

        workers = [threading.Thread(target=produce, args=(t,), daemon=True) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()  # until killed


if __name__ == "__main__":
    main()
