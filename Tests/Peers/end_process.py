#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Ends a process that is not the caller's child (one the bus daemon started) and waits until it has exited.

Usage: end_process.py PID [SIGNAL] [SECONDS]
The process is named by a pidfd, so the signal (TERM by default) cannot reach another process that reused
the pid, and its exit is awaited with poll, not by sleeping. Prints "exited" and exits 0 when the process
ended within SECONDS (default 20); prints "still running" and exits 1 otherwise.
"""
import os
import select
import signal
import sys


def main():
    pid = int(sys.argv[1])
    number = getattr(signal, "SIG" + (sys.argv[2] if len(sys.argv) > 2 else "TERM"))
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    fd = os.pidfd_open(pid)
    signal.pidfd_send_signal(fd, number)
    ready, _, _ = select.select([fd], [], [], seconds)
    print("exited" if ready else "still running")
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
