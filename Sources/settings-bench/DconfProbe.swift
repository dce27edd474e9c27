// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting

/// A small C program linked against dconf's own client library (`libdconf`), built at run time, that does
/// what a dconf client does in-process: reads from the mmap'd database, and watches a directory.
///
/// - `read <key> <batches>`: reads `key` in batches of 1000 with `dconf_client_read`; prints
///   `read <median ns per read over the batches>`.
/// - `watch <dir> <key>`: watches `dir`; prints `<value> <CLOCK_MONOTONIC ns>` for the current value and
///   again after each change notification (read with `dconf_client_read`), until it is ended.
/// - `check <prefix> <count0> <count1> …`: checks that `<prefix>w<i>/k<j>` holds `'w<i>-<j>'` for every
///   `j < count<i>`; prints `missing <n>`.
struct DconfProbe: Sendable {
    let executable: String

    /// Compiles the probe into `directory` with gcc and `pkg-config dconf` (Debian: `gcc libdconf-dev`).
    ///
    /// - Throws: ``BenchFailure`` with the compiler's output when it cannot be built.
    static func build(in directory: URL) async throws -> DconfProbe {
        let source = directory.appendingPathComponent("dconf-probe.c")
        let binary = directory.appendingPathComponent("dconf-probe")
        try Self.source.write(to: source, atomically: true, encoding: .utf8)
        let result = try await TestProcess.run(
            "/bin/sh",
            ["-c", "gcc -O2 -o '\(binary.path)' '\(source.path)' $(pkg-config --cflags --libs dconf)"],
            timeLimit: .seconds(120))
        guard result.status == 0 else {
            throw BenchFailure(
                "cannot build the dconf probe (needs: apt-get install -y gcc pkg-config libdconf-dev): "
                    + result.stderr)
        }
        return DconfProbe(executable: binary.path)
    }

    static let source = #"""
        #include <dconf.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>

        static unsigned long long now_ns(void) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
        }

        static int compare(const void *a, const void *b) {
            double x = *(const double *)a, y = *(const double *)b;
            return x < y ? -1 : x > y;
        }

        static int do_read(const char *key, long batches) {
            DConfClient *client = dconf_client_new();
            GVariant *first = dconf_client_read(client, key);
            if (first == NULL) { fprintf(stderr, "no value at %s\n", key); return 1; }
            g_variant_unref(first);
            double *per_read = calloc(batches, sizeof(double));
            size_t total = 0;
            for (long batch = 0; batch < batches; batch++) {
                unsigned long long start = now_ns();
                for (int i = 0; i < 1000; i++) {
                    GVariant *value = dconf_client_read(client, key);
                    if (value != NULL) {
                        total += strlen(g_variant_get_string(value, NULL));
                        g_variant_unref(value);
                    }
                }
                per_read[batch] = (double)(now_ns() - start) / 1000.0;
            }
            qsort(per_read, batches, sizeof(double), compare);
            printf("read %.1f %zu\n", per_read[batches / 2], total);
            return 0;
        }

        static void print_value(DConfClient *client, const char *key) {
            GVariant *value = dconf_client_read(client, key);
            unsigned long long stamp = now_ns();
            const char *text = "";
            if (value != NULL && g_variant_is_of_type(value, G_VARIANT_TYPE_STRING)) {
                text = g_variant_get_string(value, NULL);
            }
            printf("%s %llu\n", text, stamp);
            fflush(stdout);
            if (value != NULL) g_variant_unref(value);
        }

        static void changed(DConfClient *client, const gchar *prefix, const gchar *const *changes,
                            const gchar *tag, gpointer key) {
            (void)prefix; (void)changes; (void)tag;
            print_value(client, key);
        }

        static int do_watch(const char *dir, const char *key) {
            DConfClient *client = dconf_client_new();
            g_signal_connect(client, "changed", G_CALLBACK(changed), (gpointer)key);
            dconf_client_watch_sync(client, dir);
            print_value(client, key);
            g_main_loop_run(g_main_loop_new(NULL, FALSE));
            return 0;
        }

        static int do_check(const char *prefix, int writers, char **counts) {
            DConfClient *client = dconf_client_new();
            long missing = 0;
            for (int w = 0; w < writers; w++) {
                long count = atol(counts[w]);
                for (long j = 0; j < count; j++) {
                    char key[512], expected[64];
                    snprintf(key, sizeof key, "%sw%d/k%ld", prefix, w, j);
                    snprintf(expected, sizeof expected, "w%d-%ld", w, j);
                    GVariant *value = dconf_client_read(client, key);
                    if (value == NULL || !g_variant_is_of_type(value, G_VARIANT_TYPE_STRING)
                        || strcmp(g_variant_get_string(value, NULL), expected) != 0) {
                        missing++;
                    }
                    if (value != NULL) g_variant_unref(value);
                }
            }
            printf("missing %ld\n", missing);
            return 0;
        }

        int main(int argc, char **argv) {
            if (argc == 4 && strcmp(argv[1], "read") == 0) return do_read(argv[2], atol(argv[3]));
            if (argc == 4 && strcmp(argv[1], "watch") == 0) return do_watch(argv[2], argv[3]);
            if (argc >= 3 && strcmp(argv[1], "check") == 0) return do_check(argv[2], argc - 3, argv + 3);
            fprintf(stderr, "usage: dconf-probe read KEY BATCHES | watch DIR KEY | check PREFIX COUNT...\n");
            return 2;
        }
        """#
}
