#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""An app inside a sandbox made by bubblewrap, for the tests of sandboxed apps: it connects to the bus as it is
told, then runs commands read from standard input, one JSON object a line, and answers each with one JSON line.

Commands:
  {"op": "proxy", "address": A, "talk": [NAME, ...]}
      starts xdg-dbus-proxy inside the sandbox, as Flatpak does (--filter, --talk for each NAME), waits until it
      is ready (its --fd), and connects through it
  {"op": "connect", "address": A}        connects to the bus directly (a sandbox given the bus socket)
  {"op": "call", "name": N, "method": M, "signature": S, "args": EXPR}
      calls io.github.settingsbus.Settings1.M on N (or "interface" at "path"); EXPR is a Python expression for
      the argument tuple; answers {"ok": reply} or {"error": name, "message": text}
  {"op": "watch"}                        adds a match rule for every signal, and starts keeping them
  {"op": "wait", "key": K, "seconds": T, "member": M}
      runs until a signal M (Changed unless given) naming K arrives (or T seconds pass), then answers
      {"signals": [{"sender", "destination", "member", "body"}...], "seen": bool} with every signal kept
  {"op": "forget"}                       forgets the signals kept so far
  {"op": "spawn-holder", "address": A, "call": bool}
      starts a child process that connects to A, makes one Get if "call", forks a grandchild that keeps the
      connection, and exits; answers {"pid": the child's pid in the sandbox, "name": its unique name} once the
      child has exited. Later "holder-call" commands go to the grandchild.
  {"op": "holder-call", ...as call}      the grandchild makes a call on the inherited connection
  {"op": "exec", "argv": [...]}          runs a program with the proxy as its session bus; answers
      {"status", "stdout", "stderr"}
"""
import json
import os
import subprocess
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

INTERFACE = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
connection = None
kept = []
proxy = None


def plain(value):
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (dbus.Array, dbus.Struct, list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (dbus.Boolean,)):
        return bool(value)
    if isinstance(value, (dbus.String, dbus.ObjectPath, dbus.Signature, str)):
        return str(value)
    if isinstance(value, (dbus.Double, float)):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return repr(value)


def call(bus, command):
    arguments = eval(command.get("args", "()"), {"dbus": dbus})
    try:
        reply = bus.call_blocking(
            command["name"], command.get("path", PATH), command.get("interface", INTERFACE), command["method"],
            command.get("signature", ""), arguments, timeout=20)
        return {"ok": plain(reply)}
    except dbus.exceptions.DBusException as error:
        return {"error": error.get_dbus_name(), "message": error.get_dbus_message()}


def keep(*body, **details):
    kept.append({
        "sender": details.get("sender"), "destination": details.get("destination"),
        "member": details.get("member"), "body": plain(list(body)),
    })


def wait(command):
    key = command["key"]
    member = command.get("member", "Changed")
    loop = GLib.MainLoop()

    def seen():
        return any(s["member"] == member and (key in json.dumps(s["body"])) for s in kept)

    def check():
        if seen():
            loop.quit()
            return False
        return True

    GLib.timeout_add(20, check)
    GLib.timeout_add_seconds(int(command.get("seconds", 20)), loop.quit)
    loop.run()
    return {"signals": kept, "seen": seen()}


def spawn_holder(command):
    """A child that connects, maybe calls, forks a grandchild holding the connection, and exits."""
    reader, writer = os.pipe()
    commands_reader, commands_writer = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(reader)
        os.close(commands_writer)
        bus = dbus.bus.BusConnection(command["address"])
        if command.get("call"):
            call(bus, {"name": command["name"], "method": "Get", "signature": "s",
                       "args": "('" + command["key"] + "',)"})
        pid = os.getpid()
        name = str(bus.get_unique_name())
        if os.fork() != 0:
            os.write(writer, (json.dumps({"pid": pid, "name": name}) + "\n").encode())
            os._exit(0)
        # The grandchild: answers calls sent down the pipe, on the connection its parent made.
        os.close(writer)
        answers = os.fdopen(int(command["answers"]), "w") if "answers" in command else None
        with os.fdopen(commands_reader) as commands:
            for line in commands:
                result = call(bus, json.loads(line))
                if answers:
                    answers.write(json.dumps(result) + "\n")
                    answers.flush()
        os._exit(0)
    os.close(writer)
    os.close(commands_reader)
    with os.fdopen(reader) as report:
        line = report.readline()
    os.waitpid(child, 0)
    return json.loads(line), commands_writer


def main():
    global connection, proxy
    holder = None
    holder_answers = None
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "proxy":
            socket = "/run/sandbox/bus"
            ready_reader, ready_writer = os.pipe()
            arguments = ["xdg-dbus-proxy", f"--fd={ready_writer}", command["address"], socket, "--filter"]
            arguments += [f"--talk={name}" for name in command.get("talk", [])]
            proxy = subprocess.Popen(arguments, pass_fds=(ready_writer,))
            os.close(ready_writer)
            os.read(ready_reader, 1)
            connection = dbus.bus.BusConnection("unix:path=" + socket)
            answer = {"ok": str(connection.get_unique_name())}
        elif op == "connect":
            connection = dbus.bus.BusConnection(command["address"])
            answer = {"ok": str(connection.get_unique_name())}
        elif op == "call":
            answer = call(connection, command)
        elif op == "watch":
            connection.add_signal_receiver(
                keep, sender_keyword="sender", destination_keyword="destination", member_keyword="member")
            answer = {"ok": True}
        elif op == "forget":
            kept.clear()
            answer = {"ok": True}
        elif op == "wait":
            answer = wait(command)
        elif op == "spawn-holder":
            answers_reader, answers_writer = os.pipe()
            command["answers"] = answers_writer
            os.set_inheritable(answers_writer, True)
            report, holder = spawn_holder(command)
            os.close(answers_writer)
            holder_answers = os.fdopen(answers_reader)
            answer = report
        elif op == "exec":
            environment = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="unix:path=/run/sandbox/bus")
            done = subprocess.run(command["argv"], env=environment, capture_output=True, text=True, timeout=60)
            answer = {"status": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
        elif op == "holder-call":
            os.write(holder, (json.dumps(command) + "\n").encode())
            answer = json.loads(holder_answers.readline())
        else:
            answer = {"error": "unknown op " + op}
        print(json.dumps(answer), flush=True)
    if proxy:
        proxy.terminate()


main()
