#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Talks to a running settings-editor over raw HTTP for EditorTests, where a browser would hide what travels.

Usage:
  editor_http.py events URL SETTINGSCTL BUS
      Logs in with URL (the first line settings-editor --no-browser printed), opens /api/events, has another
      process (SETTINGSCTL) set the secret key /test/editor/password to 'hunter3' and then
      /test/editor/theme to 'light', and prints the raw bytes of the stream up to and with the event of the
      second change.

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


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "events":
        events(*sys.argv[2:5])
    else:
        fail(__doc__)
