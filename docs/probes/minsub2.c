/* SPDX-License-Identifier: Apache-2.0
 * Usage: minsub2 ADDRESS KEY
 * As minsub.c, but each change is handed to a second thread (a condition variable), which
 * prints it: the one hop a SettingsBus consumer's task also takes.
 */
#include <dbus/dbus.h>
#include <stdio.h>
#include <time.h>
#include <pthread.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending = 0;
static void *consumer(void *arg) {
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!pending) pthread_cond_wait(&cv, &mu);
        pending = 0;
        pthread_mutex_unlock(&mu);
        struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
        printf("x %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec); fflush(stdout);
    }
    return 0;
}
int main(int argc, char **argv) {
    DBusError err; dbus_error_init(&err);
    DBusConnection *c = dbus_connection_open_private(argv[1], &err);
    if (!c || !dbus_bus_register(c, &err)) { fprintf(stderr, "connect: %s\n", err.message); return 1; }
    char rule[512];
    snprintf(rule, sizeof rule, "type='signal',interface='io.github.settingsbus.Settings1',member='Changed',arg0path='%s'", argv[2]);
    dbus_bus_add_match(c, rule, &err);
    pthread_t t; pthread_create(&t, 0, consumer, 0);
    printf("ready\n"); fflush(stdout);
    while (dbus_connection_read_write(c, -1)) {
        DBusMessage *m;
        while ((m = dbus_connection_pop_message(c))) {
            if (dbus_message_is_signal(m, "io.github.settingsbus.Settings1", "Changed")) {
                pthread_mutex_lock(&mu); pending = 1; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu);
            }
            dbus_message_unref(m);
        }
    }
    return 0;
}
