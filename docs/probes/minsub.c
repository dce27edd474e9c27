/* SPDX-License-Identifier: Apache-2.0
 * Usage: minsub ADDRESS KEY
 * A minimal subscriber: libdbus, one thread; prints `x <CLOCK_MONOTONIC ns>` for each Changed
 * signal of KEY.
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
int main(int argc, char **argv) {
    DBusError err; dbus_error_init(&err);
    DBusConnection *c = dbus_connection_open_private(argv[1], &err);
    if (!c || !dbus_bus_register(c, &err)) { fprintf(stderr, "connect: %s\n", err.message); return 1; }
    char rule[512];
    snprintf(rule, sizeof rule, "type='signal',interface='io.github.settingsbus.Settings1',member='Changed',arg0path='%s'", argv[2]);
    dbus_bus_add_match(c, rule, &err);
    if (dbus_error_is_set(&err)) { fprintf(stderr, "match: %s\n", err.message); return 1; }
    printf("ready\n"); fflush(stdout);
    while (dbus_connection_read_write(c, -1)) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(c))) {
            if (dbus_message_is_signal(m, "io.github.settingsbus.Settings1", "Changed")) {
                struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
                printf("x %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec); fflush(stdout);
            }
            dbus_message_unref(m);
        }
    }
    return 0;
}
