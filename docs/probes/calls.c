/* SPDX-License-Identifier: Apache-2.0
 * Usage: calls ADDRESS KIND COUNT
 * A minimal libdbus client on one thread, blocking in libdbus: COUNT calls of one KIND to the broker, one
 * after another: `Ping` (Peer.Ping), `Get` ('/probe/key') or `Set` ('/probe/key' to 'value N').
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: calls ADDRESS Ping|Get|Set COUNT\n"); return 2; }
    const char *kind = argv[2];
    int count = atoi(argv[3]);
    if (strcmp(kind, "Ping") && strcmp(kind, "Get") && strcmp(kind, "Set")) {
        fprintf(stderr, "KIND is Ping, Get or Set, not %s\n", kind);
        return 2;
    }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(argv[1], &error);
    if (!connection || !dbus_bus_register(connection, &error)) { fprintf(stderr, "connect: %s\n", error.message); return 1; }
    const char *key = "/probe/key";
    for (int i = 0; i < count; i++) {
        DBusMessage *call;
        if (!strcmp(kind, "Ping")) {
            call = dbus_message_new_method_call(
                "io.github.settingsbus.Settings1", "/", "org.freedesktop.DBus.Peer", "Ping");
        } else {
            call = dbus_message_new_method_call(
                "io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1",
                "io.github.settingsbus.Settings1", kind);
            DBusMessageIter args, variant;
            dbus_message_iter_init_append(call, &args);
            dbus_message_iter_append_basic(&args, DBUS_TYPE_STRING, &key);
            if (!strcmp(kind, "Set")) {
                char text[32];
                snprintf(text, sizeof text, "value %d", i);
                const char *value = text;
                dbus_message_iter_open_container(&args, DBUS_TYPE_VARIANT, "s", &variant);
                dbus_message_iter_append_basic(&variant, DBUS_TYPE_STRING, &value);
                dbus_message_iter_close_container(&args, &variant);
            }
        }
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, -1, &error);
        dbus_message_unref(call);
        if (!reply) { fprintf(stderr, "%s failed: %s\n", kind, error.message); return 1; }
        dbus_message_unref(reply);
    }
    return 0;
}
