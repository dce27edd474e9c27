#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: fsyncpause.py [DIRECTORY] [busy]  -- a 4 KiB page written over existing blocks and fdatasync'ed,
300 times, with a pause of 0 to 5 ms before each; with `busy`, one busy loop per CPU runs meanwhile, so that
no CPU goes idle during the pauses."""
import multiprocessing
import os
import sys
import time


def spin(stop):
    while not stop.is_set():
        pass


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    busy = len(sys.argv) > 2 and sys.argv[2] == "busy"
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=spin, args=(stop,)) for _ in range(os.cpu_count() if busy else 0)]
    for spinner in spinners:
        spinner.start()
    path = os.path.join(directory, f"fsyncpause-{os.getpid()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, bytes(1 << 20))
        os.fsync(fd)
        for pause in (0, 0.0005, 0.001, 0.002, 0.005):
            times = []
            for i in range(300):
                if pause:
                    time.sleep(pause)
                os.pwrite(fd, b"p" * 4096, (i % 200) * 4096)
                t = time.perf_counter()
                os.fdatasync(fd)
                times.append(time.perf_counter() - t)
            times.sort()
            print(f"pause {pause * 1000:.1f} ms: fdatasync p50 {times[150] * 1e6:.0f} µs, "
                  f"p90 {times[270] * 1e6:.0f} µs{' (CPUs kept busy)' if busy else ''}")
    finally:
        os.close(fd)
        os.unlink(path)
        stop.set()
        for spinner in spinners:
            spinner.join()


if __name__ == "__main__":
    main()
