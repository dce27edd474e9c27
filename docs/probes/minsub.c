/* SPDX-License-Identifier: Apache-2.0
 * Usage: minsub ADDRESS KEY [hop]
 * A minimal subscriber: libdbus, one thread; prints `x <CLOCK_MONOTONIC ns>` for each Changed signal of KEY.
 * With `hop`, each change is handed to a second thread (a condition variable), which prints it: the one
 * hop a SettingsBus consumer's task also takes.
 */
#include <dbus/dbus.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int pending = 0;

static void print_stamp(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("x %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    fflush(stdout);
}

static void *consumer(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&mutex);
        while (!pending) pthread_cond_wait(&changed, &mutex);
        pending = 0;
        pthread_mutex_unlock(&mutex);
        print_stamp();
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: minsub ADDRESS KEY [hop]\n"); return 2; }
    int hop = argc > 3 && strcmp(argv[3], "hop") == 0;
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(argv[1], &error);
    if (!connection || !dbus_bus_register(connection, &error)) { fprintf(stderr, "connect: %s\n", error.message); return 1; }
    char rule[512];
    snprintf(rule, sizeof rule,
             "type='signal',interface='io.github.settingsbus.Settings1',member='Changed',arg0path='%s'", argv[2]);
    dbus_bus_add_match(connection, rule, &error);
    if (dbus_error_is_set(&error)) { fprintf(stderr, "match: %s\n", error.message); return 1; }
    pthread_t thread;
    if (hop) pthread_create(&thread, NULL, consumer, NULL);
    printf("ready\n");
    fflush(stdout);
    while (dbus_connection_read_write(connection, -1)) {
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection))) {
            if (dbus_message_is_signal(message, "io.github.settingsbus.Settings1", "Changed")) {
                if (hop) {
                    pthread_mutex_lock(&mutex);
                    pending = 1;
                    pthread_cond_signal(&changed);
                    pthread_mutex_unlock(&mutex);
                } else {
                    print_stamp();
                }
            }
            dbus_message_unref(message);
        }
    }
    return 0;
}
