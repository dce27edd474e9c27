// SPDX-License-Identifier: Apache-2.0
//
// gsettings-probe: a GSettings client in C, for settings-bench's GSettings part. It is an app as GIO sees one:
// the backend is whichever GSETTINGS_BACKEND names (settingsbus, dconf, memory), the schema is found on
// GSETTINGS_SCHEMA_DIR. Every role prints the backend's type name first, so that the bench knows GIO did not
// fall back to another backend. Times are CLOCK_MONOTONIC, one clock for every process of a run.
//
//   gsettings-probe read SCHEMA KEY BATCHES   g_settings_get_value() of KEY, which the process watches
//                                             (`changed` connected), in BATCHES batches of 1000; prints
//                                             `read <median ns per read> <characters read>`
//   gsettings-probe watch SCHEMA KEY          prints `<value> <ns>` for the string KEY's current value, then
//                                             from its `changed` handler for each change, until it is ended
//   gsettings-probe write SCHEMA KEY          prints `ready`; then for each line of standard input, takes the
//                                             time and sets the string KEY to the line: prints `<value> <ns>`;
//                                             at the end of its input, g_settings_sync() and exit
//   gsettings-probe hold SCHEMA KEY           reads KEY as an app at start does, prints `ready`, and waits for
//                                             the end of its standard input (its memory is measured meanwhile)

#include <gio/gio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long) ts.tv_sec * 1000000000ull + (unsigned long long) ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static void on_changed_nothing(GSettings *settings, const gchar *key, gpointer data) {
    (void) settings, (void) key, (void) data;
}

// Prints `backend <type name>` of the backend the settings use.
static void print_backend(GSettings *settings) {
    GObject *backend = NULL;
    g_object_get(settings, "backend", &backend, NULL);
    printf("backend %s\n", G_OBJECT_TYPE_NAME(backend));
    fflush(stdout);
    g_object_unref(backend);
}

static int do_read(GSettings *settings, const char *key, long batches) {
    if (batches < 1) batches = 1;
    g_signal_connect(settings, "changed", G_CALLBACK(on_changed_nothing), NULL);
    GVariant *first = g_settings_get_value(settings, key);
    g_variant_unref(first);
    double *per_read = g_new0(double, batches);
    gsize total = 0;
    for (long batch = 0; batch < batches; batch++) {
        unsigned long long start = now_ns();
        for (int i = 0; i < 1000; i++) {
            GVariant *value = g_settings_get_value(settings, key);
            gsize length = 0;
            g_variant_get_string(value, &length);
            total += length;
            g_variant_unref(value);
        }
        per_read[batch] = (double) (now_ns() - start) / 1000.0;
    }
    qsort(per_read, (size_t) batches, sizeof(double), compare_doubles);
    printf("read %.1f %" G_GSIZE_FORMAT "\n", per_read[batches / 2], total);
    g_free(per_read);
    return 0;
}

static void print_value(GSettings *settings, const char *key) {
    gchar *value = g_settings_get_string(settings, key);
    unsigned long long stamp = now_ns();
    printf("%s %llu\n", value, stamp);
    fflush(stdout);
    g_free(value);
}

static void on_changed_print(GSettings *settings, const gchar *key, gpointer data) {
    (void) data;
    print_value(settings, key);
}

static int do_watch(GSettings *settings, const char *key) {
    gchar *signal = g_strconcat("changed::", key, NULL);
    g_signal_connect(settings, signal, G_CALLBACK(on_changed_print), NULL);
    g_free(signal);
    print_value(settings, key);
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    g_main_loop_run(loop);
    return 0;
}

static int do_write(GSettings *settings, const char *key) {
    g_signal_connect(settings, "changed", G_CALLBACK(on_changed_nothing), NULL);
    gchar *current = g_settings_get_string(settings, key);
    g_free(current);
    printf("ready\n");
    fflush(stdout);
    char line[4096];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        unsigned long long start = now_ns();
        if (!g_settings_set_string(settings, key, line)) {
            fprintf(stderr, "gsettings-probe: the backend refused to set %s\n", key);
            return 1;
        }
        printf("%s %llu\n", line, start);
        fflush(stdout);
    }
    g_settings_sync();
    return 0;
}

static int do_hold(GSettings *settings, const char *key) {
    g_signal_connect(settings, "changed", G_CALLBACK(on_changed_nothing), NULL);
    GVariant *value = g_settings_get_value(settings, key);
    g_variant_unref(value);
    printf("ready\n");
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {}
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: gsettings-probe read|watch|write|hold SCHEMA KEY [BATCHES]\n");
        return 2;
    }
    const char *role = argv[1];
    GSettings *settings = g_settings_new(argv[2]);
    print_backend(settings);
    int status = 2;
    if (strcmp(role, "read") == 0 && argc == 5)
        status = do_read(settings, argv[3], atol(argv[4]));
    else if (strcmp(role, "watch") == 0 && argc == 4)
        status = do_watch(settings, argv[3]);
    else if (strcmp(role, "write") == 0 && argc == 4)
        status = do_write(settings, argv[3]);
    else if (strcmp(role, "hold") == 0 && argc == 4)
        status = do_hold(settings, argv[3]);
    else
        fprintf(stderr, "usage: gsettings-probe read|watch|write|hold SCHEMA KEY [BATCHES]\n");
    g_object_unref(settings);
    return status;
}
