/* SPDX-License-Identifier: Apache-2.0
 * Usage: pingget ADDRESS COUNT
 * A minimal libdbus client on one thread, blocking in libdbus: COUNT rounds of `Peer.Ping` to the broker
 * and `Get('/probe/key')`, alternating; prints both p50s and their ratio. It shows the broker's share of a
 * `Get` beyond a `Ping` without a binding's thread hand-offs on the client side.
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Sends `message` and waits for its reply; returns the nanoseconds taken, or -1 on failure. */
static long long round_trip(DBusConnection *connection, DBusMessage *message) {
    DBusError error;
    dbus_error_init(&error);
    long long started = now();
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, message, -1, &error);
    long long taken = now() - started;
    dbus_message_unref(message);
    if (!reply) {
        fprintf(stderr, "call failed: %s\n", error.message);
        return -1;
    }
    dbus_message_unref(reply);
    return taken;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: pingget ADDRESS COUNT\n"); return 2; }
    int count = atoi(argv[2]);
    if (count < 1) { fprintf(stderr, "COUNT must be at least 1\n"); return 2; }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(argv[1], &error);
    if (!connection || !dbus_bus_register(connection, &error)) { fprintf(stderr, "connect: %s\n", error.message); return 1; }
    long long *pings = malloc(sizeof *pings * count), *gets = malloc(sizeof *gets * count);
    const char *key = "/probe/key";
    for (int i = 0; i < count; i++) {
        DBusMessage *ping = dbus_message_new_method_call(
            "io.github.settingsbus.Settings1", "/", "org.freedesktop.DBus.Peer", "Ping");
        DBusMessage *get = dbus_message_new_method_call(
            "io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1", "io.github.settingsbus.Settings1",
            "Get");
        dbus_message_append_args(get, DBUS_TYPE_STRING, &key, DBUS_TYPE_INVALID);
        if ((pings[i] = round_trip(connection, ping)) < 0 || (gets[i] = round_trip(connection, get)) < 0) return 1;
    }
    qsort(pings, count, sizeof *pings, compare);
    qsort(gets, count, sizeof *gets, compare);
    printf("Ping p50 %.0f µs, Get p50 %.0f µs: %.2f×\n", pings[count / 2] / 1e3, gets[count / 2] / 1e3,
           (double)gets[count / 2] / pings[count / 2]);
    return 0;
}
