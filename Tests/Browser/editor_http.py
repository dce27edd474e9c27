#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Talks to a running settings-editor over raw HTTP for EditorTests, where a browser would hide what travels.

Usage:
  editor_http.py events URL SETTINGSCTL BUS
      Logs in with URL (the first line settings-editor --no-browser printed), opens /api/events, has another
      process (SETTINGSCTL) set the secret key /test/editor/password to 'hunter3' and then
      /test/editor/theme to 'light', and prints the raw bytes of the stream up to and with the event of the
      second change.
  editor_http.py hold PORT COUNT SECONDS
      Opens COUNT connections to the editor on 127.0.0.1:PORT, sends each the start of a request (a request
      line and one header, no end) and holds them; prints "held K" (K connected), then waits up to SECONDS for
      the editor to close them and prints "closed C of K, the last after T s" (T as a decimal), then exits.
  editor_http.py ask URL PATH
      Logs in with URL, then GETs PATH with the session's cookie on a new connection; prints
      "answered STATUS in T s", the time from the login's start to the end of the answer.

Waits for events with time limits (socket timeouts), never with sleeps; exits 1 with the reason on failure.
"""

import http.client
import socket
import subprocess
import sys
import time
import urllib.parse


def fail(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def login(url):
    """Exchanges the one-time token of URL for the session cookie; returns (port, 'name=value')."""
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection("127.0.0.1", parsed.port, timeout=10)
    connection.request("GET", parsed.path + "?" + parsed.query, headers={"Host": f"127.0.0.1:{parsed.port}"})
    response = connection.getresponse()
    response.read()
    cookie = response.getheader("Set-Cookie")
    connection.close()
    if response.status not in (200, 303) or not cookie:
        fail(f"login: status {response.status}, cookie {cookie!r}")
    return parsed.port, cookie.split(";")[0]


def read_until(stream, buffer, needle, deadline):
    """Reads from the socket until buffer holds needle; returns the buffer."""
    while needle not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            fail(f"timed out waiting for {needle!r}; read so far: {buffer!r}")
        stream.settimeout(remaining)
        try:
            chunk = stream.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            fail(f"the stream ended before {needle!r}; read: {buffer!r}")
        buffer += chunk
    return buffer


def events(url, settingsctl, bus):
    port, cookie = login(url)
    stream = socket.create_connection(("127.0.0.1", port), timeout=10)
    stream.sendall((f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: {cookie}\r\n"
                    "Accept: text/event-stream\r\n\r\n").encode())
    deadline = time.monotonic() + 30
    buffer = read_until(stream, b"", b": open\n", deadline)
    for key, value in [("/test/editor/password", "'hunter3'"), ("/test/editor/theme", "'light'")]:
        result = subprocess.run([settingsctl, "set", "--bus", bus, key, value], capture_output=True, text=True,
                                timeout=30)
        if result.returncode != 0:
            fail(f"settingsctl set {key}: {result.returncode} {result.stderr}")
    buffer = read_until(stream, buffer, b"/test/editor/theme", deadline)
    start = buffer.index(b"/test/editor/theme")
    buffer = buffer[:start] + read_until(stream, buffer[start:], b"\n\n", deadline)
    stream.close()
    sys.stdout.buffer.write(buffer)
    sys.stdout.flush()


def hold(port, count, seconds):
    import resource
    import select
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 64)), hard))
    pending = []
    for _ in range(count):
        stream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stream.setblocking(False)
        stream.connect_ex(("127.0.0.1", port))
        pending.append(stream)
    # Connected once writable (the kernel completes a connection to a listening socket's backlog at once).
    connected = []
    deadline = time.monotonic() + 10
    while pending and time.monotonic() < deadline:
        poller = select.poll()
        for stream in pending:
            poller.register(stream, select.POLLOUT)
        ready = {fd for fd, _ in poller.poll(max(0, int((deadline - time.monotonic()) * 1000)))}
        still = []
        for stream in pending:
            if stream.fileno() in ready:
                if stream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    connected.append(stream)
                else:
                    stream.close()
            else:
                still.append(stream)
        pending = still
    for stream in pending:
        stream.close()
    start = time.monotonic()
    part = f"GET /api/dir?path=/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    for stream in connected:
        try:
            stream.send(part)
        except OSError:
            pass
    print(f"held {len(connected)}", flush=True)
    # Each connection is closed by the editor when a read gives end-of-file (or a reset).
    open_streams = {stream.fileno(): stream for stream in connected}
    closed = 0
    last = 0.0
    deadline = start + seconds
    while open_streams and time.monotonic() < deadline:
        poller = select.poll()
        for fd in open_streams:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        for fd, _ in poller.poll(max(0, int((deadline - time.monotonic()) * 1000))):
            stream = open_streams[fd]
            try:
                data = stream.recv(65536)
            except (ConnectionResetError, OSError):
                data = b""
            if not data:
                del open_streams[fd]
                stream.close()
                closed += 1
                last = time.monotonic() - start
    print(f"closed {closed} of {len(connected)}, the last after {last:.2f} s", flush=True)
    for stream in open_streams.values():
        stream.close()


def ask(url, path):
    start = time.monotonic()
    port, cookie = login(url)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "Cookie": cookie})
    response = connection.getresponse()
    response.read()
    connection.close()
    print(f"answered {response.status} in {time.monotonic() - start:.3f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "events":
        events(*sys.argv[2:5])
    elif len(sys.argv) == 5 and sys.argv[1] == "hold":
        hold(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) == 4 and sys.argv[1] == "ask":
        ask(sys.argv[2], sys.argv[3])
    else:
        fail(__doc__)
