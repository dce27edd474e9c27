// SPDX-License-Identifier: Apache-2.0
//
// The GSettings backend `settingsbus`: a GIO module that stores every GSettings app's settings through the
// settings broker (io.github.settingsbus.Settings1) instead of dconf. It is selected with
// GSETTINGS_BACKEND=settingsbus and registered below every other backend, so it is used only when asked for.
//
// How it keeps GLib's contract for backends:
// - Reads come from a local copy of each directory in use. The first read below a directory (or GSettings'
//   subscribe) watches it (Changed, matched with arg0path in the bus daemon) and then reads it whole
//   (ReadTreeLayers), before the read returns: every `gsettings` command is a new process that reads once. A
//   read whose answer does not come within BROKER_WAIT_MS gives what the copy holds (else the schema's default);
//   its answer is taken when it comes, and what it changes announced. A directory whose read failed is read again
//   at its next read. When the last GSettings object of a directory goes (unsubscribe), its watch and copy go. The
//   copy keeps the user's values and the administrator's defaults apart, as dconf's engine keeps its user and
//   system databases: a key reads the user's value, else the administrator's default, else nothing, and
//   GSettings then gives the schema's default (translated, or the desktop's). g_settings_get_user_value() is the
//   user's value alone, g_settings_get_default_value() the administrator's default, else GSettings' own. The
//   administrator's changes (Changed from origin `administrator`) are read again from the broker. The user's
//   value of a key the administrator locked is not served, so not in the copy: g_settings_get_user_value() asks
//   the broker for it (Describe), as dconf reads it from the user's database.
// - Writes never block: the copy changes, `changed` is emitted, and the write is sent to the broker from the
//   app's thread, without waiting for the answer, which the connection's filter takes on GDBus's thread; the
//   broker commits one connection's writes in the order they were sent. A write the broker refuses (a type,
//   range or choice, a lock) or does not answer within 10 s is undone in the copy, with `changed` again, and
//   logged with the broker's error.
//   A key already known to be locked is refused at once (write returns FALSE), and so is every write while the
//   broker does not answer.
// - A key with writes of the process not answered yet reads as the last of them: the broker's Changed signals
//   (of the process's own earlier writes, or of other processes') are kept aside for it, by serial, and the copy
//   takes the broker's newest value once the key has no write left in flight.
// - write_tree (g_settings_apply) is one Apply: one commit, one Changed. reset is a Reset. sync waits until the
//   broker answered every write sent, within BROKER_WAIT_MS; in the `gsettings` program, a write refused or not
//   answered by then ends it with status 1.
// - A directory read is followed by its lock list (Locks): a write of a key it locks is refused at once, even in
//   a process that never asked (`gsettings set` then says the key is not writable). get_writable answers from
//   the list, else from Describe, kept per key; a DescriptionChanged that names a key drops both for it (the
//   list of its directory) and emits `writable-changed`.
// - D-Bus has no maybe type: a value of a maybe type `mT` is stored as an array `aT` of no element (nothing) or
//   one (just the value), and read back as a maybe when the schema's type is one.
//
// - What comes from the bus is checked before GLib sees it: an answer or a signal counts only from the owner of
//   the broker's name (followed in the order of the bus: GetNameOwner, then NameOwnerChanged) or, for an
//   answer, from the bus daemon; a key that is not a key GSettings takes is dropped (logged once). A new owner,
//   or a Changed whose serial went back (a store restored from its backup), has every watched directory read
//   again.
//
// A filter on the connection takes, on GDBus's own thread and in the order of the bus, the answers to every call
// the module makes (writes, reads, lock lists, the calls a thread waits for), the broker's Changed signals and
// NameOwnerChanged. The module's thread, with its own main context, holds the subscriptions (their match rules,
// and DescriptionChanged), so that they work whether or not the app runs a main loop in the thread that first
// read; GSettingsBackend hands `changed` to each watcher in the watcher's own context.

#define _GNU_SOURCE // program_invocation_short_name
#define G_SETTINGS_ENABLE_BACKEND
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gsettingsbackend.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SETTINGS_BUS_NAME "io.github.settingsbus.Settings1"
#define SETTINGS_OBJECT_PATH "/io/github/settingsbus/Settings1"
#define SETTINGS_INTERFACE "io.github.settingsbus.Settings1"
// A write left unanswered this long is undone.
#define CALL_TIMEOUT_MS 10000
// The longest a thread of the app waits for the broker: a read, a call, sync. Five times the slowest start of a
// broker by D-Bus activation measured with 100,000 keys on a busy machine (384 ms, docs/benchmarks.md), so that
// the first read of an app that starts the broker is served by it. A wait that ends unanswered marks the broker
// as not answering: until it answers again, no thread waits for it at all, reads serve what the copy holds (else
// the schema's defaults), and writes are refused; the reads sent meanwhile are taken when it answers, and what
// they change is announced.
#define BROKER_WAIT_MS 2000

typedef struct {
    GSettingsBackend parent_instance;
    // Guards values, administrator, confirmed, in_flight, directories, writability, replies, calls, reply_timer,
    // pending, owner and owner_serial.
    GMutex lock;
    GCond idle;
    GDBusConnection *bus; // NULL until the module's thread has connected it, and when it cannot be reached
    gboolean connecting; // the module's thread is connecting to the session bus (connect_in_context)
    gchar *bus_guid; // the GUID in the session bus's address, which names it before it is connected (NULL: none)
    gchar *bus_socket; // else the identity of its socket file, "device:inode" (NULL: none)
    GHashTable *values; // key -> GVariant (as stored: D-Bus types), the user's value; a key without one is absent
    GHashTable *administrator; // key -> GVariant (as stored): the administrator's default, read with its directory
    GHashTable *confirmed; // key -> Confirmed: the broker's value of a key, with the serial it was known at
    GHashTable *in_flight; // key -> GUINT_TO_POINTER(the writes of the key sent, not answered yet)
    GHashTable *directories; // directory -> DirectoryWatch: the directories read and watched
    GHashTable *writability; // key -> GINT_TO_POINTER(WRITABLE or LOCKED)
    GHashTable *replies; // GUINT_TO_POINTER(a write's message serial) -> PendingWrite, until the broker answers
    GSource *reply_timer; // on the signal thread while a write waits for its answer: ends those past their time
    guint pending; // writes made and not answered yet
    guint unstored; // writes the broker refused, or that failed or went unanswered, since the last sync
    GMainContext *context; // the signal thread's context
    GMainLoop *loop;
    GThread *signal_thread;
    guint description_subscription;
    gint warned_unreachable; // whether a read's failure was logged (atomic)
    gboolean unanswering; // a wait for the broker ended unanswered, and it has not answered since
    GHashTable *calls; // GUINT_TO_POINTER(a call's message serial) -> WaitedCall, while a thread waits for it
    // The unique name that owns the broker's name, followed by the connection's filter in the order of the bus
    // (GetNameOwner at start, then NameOwnerChanged); NULL: none. Only its answers and signals count.
    gchar *owner;
    guint32 owner_serial; // the message serial of GetNameOwner, until it is answered
    guint64 newest_serial; // the newest serial of the owner's Changed signals
    gchar *view; // the folder of the broker's view (decision 0037), NULL: none usable
    guint filter; // the connection's filter that takes Changed signals on GDBus's own thread
    struct FilterTarget *filter_target;
} SettingsBusBackend;

// What the connection's filter reaches the backend by. A filter may still run on GDBus's thread after it was
// removed, so finalize clears `backend` under `lock` instead of freeing what the filter uses; the last of the
// filter and the backend to let go frees it.
typedef struct FilterTarget {
    GMutex lock;
    SettingsBusBackend *backend;
    gint references;
} FilterTarget;

static void filter_target_release(gpointer data) {
    FilterTarget *target = data;
    if (!g_atomic_int_dec_and_test(&target->references)) return;
    g_mutex_clear(&target->lock);
    g_free(target);
}

typedef GSettingsBackendClass SettingsBusBackendClass;

enum { WRITABLE = 1, LOCKED = 2 };

typedef struct {
    guint subscription;
    guint users; // the GSettings objects subscribed to it; when the last goes, the watch and its copy go
    guint64 serial; // the serial of the read; Changed signals up to it are in the copy already
    gchar **locks; // the administrator's locks over the directory's keys (Locks), NULL when not known
    gboolean loaded; // read since it was watched (FALSE while its first read is out, or after it failed)
    guint32 reading; // the message serial of its read awaiting an answer (0: none)
    guint32 reading_locks; // the message serial of its Locks awaiting an answer (0: none)
    gboolean announce; // its read's changes are announced (`changed`): no thread waits for it
    gboolean from_view; // first read from the broker's view: its read on the bus is taken when it comes, unwaited
} DirectoryWatch;

static void directory_watch_free(gpointer data) {
    DirectoryWatch *watch = data;
    g_strfreev(watch->locks);
    g_free(watch);
}

typedef struct {
    GVariant *value; // NULL: no value
    guint64 serial;
} Confirmed;

typedef struct {
    enum { WRITE_SET, WRITE_APPLY, WRITE_RESET } kind;
    gchar *key; // WRITE_SET, WRITE_RESET
    GVariant *value; // WRITE_SET: the stored form
    GVariant *arguments; // WRITE_APPLY: (a{sv}asa{sv})
    GHashTable *written; // key -> what this write put in the copy (NULL: removed)
    gint64 deadline; // g_get_monotonic_time() past which the write is taken as unanswered
    gchar *to; // the broker's unique name when the write was sent (NULL: none known)
} PendingWrite;

// A call of the module's awaiting its answer (the table `calls`, by message serial): one a thread waits for
// (call_broker), or a directory's read or lock list, whose answer the connection's filter takes.
typedef struct {
    enum { CALL_WAITED, CALL_READ, CALL_LOCKS } kind;
    gchar *to; // the broker's unique name when the call was sent (NULL: none known)
    GDBusMessage *reply; // CALL_WAITED: the answer, once the filter took it
    gboolean done; // CALL_WAITED
    gchar *directory; // CALL_READ, CALL_LOCKS: the directory read
    guint method; // CALL_READ: the method asked, in read_methods
    gboolean again; // CALL_READ: a read again of a path, for the watched directories at or below it
} BrokerCall;

// A directory's read: a broker older than version 5 answers UnknownMethod to ReadTreeLayers; then its
// ReadTreeWithoutSchemaDefaults (version 4), else its ReadTree, gives the values it serves, taken as the user's.
static const gchar *const read_methods[] = {"ReadTreeLayers", "ReadTreeWithoutSchemaDefaults", "ReadTree"};

// The end of a wait for the broker that starts now: BROKER_WAIT_MS away, or now when the broker is not answering.
// Lock held.
static gint64 wait_deadline_locked(SettingsBusBackend *self) {
    return g_get_monotonic_time() + (self->unanswering ? 0 : (gint64) BROKER_WAIT_MS * 1000);
}

// A wait for the broker ended unanswered: no thread waits for it again until it answers. Returns whether this is
// news to log (say_unanswering, once for the process). Lock held.
static gboolean mark_unanswering_locked(SettingsBusBackend *self) {
    gboolean news = !self->unanswering;
    self->unanswering = TRUE;
    return news;
}

static void say_unanswering(void) {
    static gint said = 0;
    if (!g_atomic_int_compare_and_exchange(&said, 0, 1)) return;
    g_warning("settingsbus: the settings broker does not answer within %d s: settings read what this app knew, "
              "else their defaults, and are not written, until it answers",
              BROKER_WAIT_MS / 1000);
}

// Says, once for the process, that the session bus itself did not let the module connect within BROKER_WAIT_MS.
static void say_bus_unanswering(void) {
    static gint said = 0;
    if (!g_atomic_int_compare_and_exchange(&said, 0, 1)) return;
    g_warning("settingsbus: the session bus does not answer within %d s: settings the view does not hold read "
              "their defaults until it does",
              BROKER_WAIT_MS / 1000);
}

static void broker_call_free(BrokerCall *call) {
    g_free(call->to);
    g_free(call->directory);
    if (call->reply) g_object_unref(call->reply);
    g_free(call);
}

#define BUS_DAEMON "org.freedesktop.DBus"
#define OWNER_RULE                                                                                               \
    "type='signal',sender='" BUS_DAEMON "',interface='" BUS_DAEMON "',member='NameOwnerChanged',path='/org/"    \
    "freedesktop/DBus',arg0='" SETTINGS_BUS_NAME "'"

static gboolean take_reply(SettingsBusBackend *self, GDBusMessage *message);
static gboolean take_owner_change(SettingsBusBackend *self, GDBusMessage *message);
static void call_bus_daemon(SettingsBusBackend *self, const gchar *method, GVariant *arguments, guint32 *serial);

GType settings_bus_backend_get_type(void);
G_DEFINE_DYNAMIC_TYPE(SettingsBusBackend, settings_bus_backend, G_TYPE_SETTINGS_BACKEND)

#define SETTINGS_BUS_BACKEND(object) ((SettingsBusBackend *) (object))

// MARK: - Values

// A GVariant table's value destructor: the tables of a write hold NULL for "no value".
static void variant_unref_or_null(gpointer value) {
    if (value) g_variant_unref(value);
}

// The length of a key's directory: everything up to its last '/' (0 for a key without one).
static gsize directory_length(const gchar *key) {
    const gchar *slash = strrchr(key, '/');
    return slash ? (gsize) (slash - key + 1) : 0;
}

// The directory of a key ("/" for a key without a '/').
static gchar *directory_of(const gchar *key) {
    gsize length = directory_length(key);
    return length ? g_strndup(key, length) : g_strdup("/");
}

// Whether a name from the bus is a key GLib takes (GSettingsBackend's `is_key`, which raises a CRITICAL for any
// other): '/' first, not '/' last, no "//".
static gboolean valid_key(const gchar *key) {
    gsize length = key ? strlen(key) : 0;
    return length > 1 && key[0] == '/' && key[length - 1] != '/' && !strstr(key, "//");
}

// Whether a name from the bus is a directory (GSettingsBackend's `is_path`): '/' first and last, no "//".
static gboolean valid_directory(const gchar *path) {
    gsize length = path ? strlen(path) : 0;
    return length > 0 && path[0] == '/' && path[length - 1] == '/' && !strstr(path, "//");
}

// Whether `key` is a key of `directory` itself (not of a directory below it).
static gboolean key_of_directory(const gchar *key, const gchar *directory) {
    gsize length = strlen(directory);
    return valid_key(key) && strncmp(key, directory, length) == 0 && directory_length(key) == length;
}

// Says, once for the process, that something the bus brought was dropped before GLib saw it: a key that is not a
// key, or one outside the directory it was read for. The rest of the reply or signal is taken.
static void drop_entry(const gchar *what, const gchar *name) {
    static gint warned = 0;
    if (!g_atomic_int_compare_and_exchange(&warned, 0, 1)) return;
    gchar *shown = g_strescape(name ? name : "", NULL);
    g_warning("settingsbus: dropped %s \"%s\" from the settings broker (it is not a key GSettings takes); "
              "later ones are dropped without a word",
              what, shown);
    g_free(shown);
}

// The stored form of a value: a maybe `mT` becomes an array `aT` of no element or one.
// A floating value is consumed.
static GVariant *stored_form(GVariant *value) {
    g_variant_ref_sink(value);
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE_MAYBE)) return value;
    const GVariantType *element = g_variant_type_element(g_variant_get_type(value));
    GVariant *inner = g_variant_get_maybe(value);
    GVariant *array = g_variant_new_array(element, inner ? &inner : NULL, inner ? 1 : 0);
    if (inner) g_variant_unref(inner);
    g_variant_unref(value);
    return g_variant_ref_sink(array);
}

// A stored value read as the schema's type: NULL when it is not of that type (GSettings then gives the
// schema's default).
static GVariant *read_form(GVariant *stored, const GVariantType *expected) {
    if (!expected || g_variant_is_of_type(stored, expected)) return g_variant_ref(stored);
    if (g_variant_type_is_maybe(expected) && g_variant_is_of_type(stored, G_VARIANT_TYPE_ARRAY)) {
        const GVariantType *element = g_variant_type_element(expected);
        gsize count = g_variant_n_children(stored);
        if (count > 1) return NULL;
        if (count == 0) return g_variant_ref_sink(g_variant_new_maybe(element, NULL));
        GVariant *inner = g_variant_get_child_value(stored, 0);
        GVariant *maybe = NULL;
        if (g_variant_is_of_type(inner, element)) maybe = g_variant_ref_sink(g_variant_new_maybe(element, inner));
        g_variant_unref(inner);
        return maybe;
    }
    return NULL;
}

// Puts a value in the copy (NULL removes it); returns whether the copy changed. Lock held.
static gboolean put_locked(SettingsBusBackend *self, const gchar *key, GVariant *stored) {
    GVariant *old = g_hash_table_lookup(self->values, key);
    if (old == NULL && stored == NULL) return FALSE;
    if (old != NULL && stored != NULL && g_variant_equal(old, stored)) return FALSE;
    if (stored)
        g_hash_table_insert(self->values, g_strdup(key), g_variant_ref(stored));
    else
        g_hash_table_remove(self->values, key);
    return TRUE;
}

static void confirmed_free(gpointer data) {
    Confirmed *confirmed = data;
    if (confirmed->value) g_variant_unref(confirmed->value);
    g_free(confirmed);
}

static guint in_flight_locked(SettingsBusBackend *self, const gchar *key) {
    return GPOINTER_TO_UINT(g_hash_table_lookup(self->in_flight, key));
}

// Takes the broker's value of a key at a serial (NULL: no value), unless a newer one is known: a Changed signal
// (`from_signal`) replaces what is known at the same serial, a write's reply does not (the signal of a Reset
// brings the value the broker serves after it). The copy follows when no write of the key is in flight, and the
// key is added to `changed` when the copy changed. Lock held.
static void confirm_locked(SettingsBusBackend *self, const gchar *key, GVariant *value, guint64 serial,
                           gboolean from_signal, GPtrArray *changed) {
    Confirmed *known = g_hash_table_lookup(self->confirmed, key);
    if (known && (from_signal ? serial < known->serial : serial <= known->serial)) return;
    if (!known) {
        known = g_new0(Confirmed, 1);
        g_hash_table_insert(self->confirmed, g_strdup(key), known);
    }
    if (value) g_variant_ref(value);
    if (known->value) g_variant_unref(known->value);
    known->value = value;
    known->serial = serial;
    if (in_flight_locked(self, key) == 0 && put_locked(self, key, value) && changed)
        g_ptr_array_add(changed, g_strdup(key));
}

// Sends a call to the broker, recorded in `calls` with the owner of its name now: the connection's filter takes
// its answer, counted only from the broker (take_reply). GDBus's own calls match an answer by its serial alone, and
// a peer that reads the app's calls on the bus could answer first. Returns the message serial (0: not sent; then
// `call` is not recorded). `arguments` is consumed when floating. Lock held, so that the answer finds the call.
static guint32 send_call_locked(SettingsBusBackend *self, const gchar *method, GVariant *arguments, BrokerCall *call) {
    GDBusMessage *message =
        g_dbus_message_new_method_call(SETTINGS_BUS_NAME, SETTINGS_OBJECT_PATH, SETTINGS_INTERFACE, method);
    g_dbus_message_set_body(message, arguments);
    guint32 serial = 0;
    g_free(call->to);
    call->to = g_strdup(self->owner);
    if (self->bus && g_dbus_connection_send_message(self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, &serial, NULL))
        g_hash_table_insert(self->calls, GUINT_TO_POINTER(serial), call);
    else
        serial = 0;
    g_object_unref(message);
    return serial;
}

// Waits while the module's thread connects to the session bus, up to BROKER_WAIT_MS (a bus daemon that does not
// answer); returns whether the bus is connected. Lock held.
static gboolean wait_connected_locked(SettingsBusBackend *self) {
    gint64 deadline = g_get_monotonic_time() + (gint64) BROKER_WAIT_MS * 1000;
    while (self->connecting)
        if (!g_cond_wait_until(&self->idle, &self->lock, deadline)) break;
    return self->bus != NULL;
}

// Whether the session bus is connected, once the module's thread is done connecting (wait_connected_locked).
static gboolean bus_ready(SettingsBusBackend *self) {
    g_mutex_lock(&self->lock);
    gboolean ready = wait_connected_locked(self);
    g_mutex_unlock(&self->lock);
    return ready;
}

// Calls a method of the broker and waits for its reply, of type `reply_type` (NULL, with `error` set, when it
// fails or times out). `arguments` is consumed when floating.
static GVariant *call_broker(SettingsBusBackend *self, const gchar *method, GVariant *arguments,
                             const gchar *reply_type, GError **error) {
    BrokerCall call = {CALL_WAITED, NULL, NULL, FALSE, NULL, 0, FALSE};
    g_mutex_lock(&self->lock);
    wait_connected_locked(self);
    if (self->unanswering) {
        g_mutex_unlock(&self->lock);
        g_variant_unref(g_variant_ref_sink(arguments));
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "the broker does not answer");
        return NULL;
    }
    gint64 deadline = wait_deadline_locked(self);
    guint32 serial = send_call_locked(self, method, arguments, &call);
    gboolean news = FALSE;
    if (serial) {
        while (!call.done)
            if (!g_cond_wait_until(&self->idle, &self->lock, deadline)) break;
        if (!call.done) {
            g_hash_table_remove(self->calls, GUINT_TO_POINTER(serial));
            news = mark_unanswering_locked(self);
        }
    }
    g_mutex_unlock(&self->lock);
    g_free(call.to);
    if (news) say_unanswering();
    if (!serial) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_CLOSED, "cannot send %s: the connection is closed", method);
        return NULL;
    }
    if (!call.done) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "no answer to %s within %d s", method,
                    BROKER_WAIT_MS / 1000);
        return NULL;
    }
    GVariant *body = NULL;
    if (!g_dbus_message_to_gerror(call.reply, error)) {
        body = g_dbus_message_get_body(call.reply);
        if (body && g_variant_is_of_type(body, G_VARIANT_TYPE(reply_type)))
            g_variant_ref(body);
        else {
            body = NULL;
            g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "the broker's answer to %s is not of type %s",
                        method, reply_type);
        }
    }
    g_object_unref(call.reply);
    return body;
}

// Sends a read of a directory (`method`, in read_methods), answered to the connection's filter (take_read_locked).
// Returns its message serial (0: not sent). Lock held.
static guint32 send_read_locked(SettingsBusBackend *self, const gchar *directory, guint method, gboolean again) {
    BrokerCall *call = g_new0(BrokerCall, 1);
    call->kind = CALL_READ;
    call->directory = g_strdup(directory);
    call->method = method;
    call->again = again;
    guint32 serial = send_call_locked(self, read_methods[method], g_variant_new("(s)", directory), call);
    if (!serial) broker_call_free(call);
    return serial;
}

// Sends a watched directory's read and the administrator's locks over its keys (Locks), one after the other: the
// watch is loaded once both are answered. Lock held.
static void read_watch_locked(SettingsBusBackend *self, const gchar *directory, DirectoryWatch *watch) {
    watch->reading = send_read_locked(self, directory, 0, FALSE);
    BrokerCall *locks = g_new0(BrokerCall, 1);
    locks->kind = CALL_LOCKS;
    locks->directory = g_strdup(directory);
    watch->reading_locks = send_call_locked(self, "Locks", g_variant_new("(s)", directory), locks);
    if (!watch->reading_locks) broker_call_free(locks);
}

// Takes the administrator's defaults of a directory's read (`defaults`, a{sv}): each key below `directory` that
// has one gets it, each that no longer has one loses it; each key whose default changed is added to `changed`
// (NULL: not collected). With `read_only`, only keys of directories read already (a read again of a directory
// above them: the copy holds no other key); with `direct`, the defaults are of the directory's own keys alone (the
// view's), and those of the keys below it stay. Lock held.
static void take_administrator_locked(SettingsBusBackend *self, const gchar *directory, GVariant *defaults,
                                      gboolean read_only, gboolean direct, GPtrArray *changed) {
    GHashTableIter iter;
    gpointer key, value;
    GPtrArray *gone = g_ptr_array_new_with_free_func(g_free);
    g_hash_table_iter_init(&iter, self->administrator);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (!g_str_has_prefix(key, directory) || (direct && !key_of_directory(key, directory))) continue;
        GVariant *kept = g_variant_lookup_value(defaults, key, NULL);
        if (kept)
            g_variant_unref(kept);
        else
            g_ptr_array_add(gone, g_strdup(key));
    }
    for (guint index = 0; index < gone->len; index++) {
        g_hash_table_remove(self->administrator, gone->pdata[index]);
        if (changed) g_ptr_array_add(changed, g_strdup(gone->pdata[index]));
    }
    g_ptr_array_unref(gone);
    GVariantIter entries;
    const gchar *name = NULL;
    GVariant *entry = NULL;
    g_variant_iter_init(&entries, defaults);
    while (g_variant_iter_loop(&entries, "{&sv}", &name, &entry)) {
        if (!valid_key(name) || !g_str_has_prefix(name, directory)) {
            drop_entry("an administrator's default of", name);
            continue;
        }
        GVariant *old = g_hash_table_lookup(self->administrator, name);
        if (old && g_variant_equal(old, entry)) continue;
        if (read_only) {
            gchar *name_directory = directory_of(name);
            gboolean read = g_hash_table_contains(self->directories, name_directory);
            g_free(name_directory);
            if (!read) continue;
        } else if (!key_of_directory(name, directory)) {
            continue;
        }
        g_hash_table_insert(self->administrator, g_strdup(name), g_variant_ref(entry));
        if (changed) g_ptr_array_add(changed, g_strdup(name));
    }
}

// MARK: - The signal thread

typedef struct {
    SettingsBusBackend *self;
    const gchar *directory;
    guint subscription;
    gboolean done;
} Subscribing;

static void on_changed(GDBusConnection *, const gchar *, const gchar *, const gchar *, const gchar *, GVariant *,
                       gpointer);

static gboolean subscribe_in_context(gpointer data) {
    Subscribing *subscribing = data;
    SettingsBusBackend *self = subscribing->self;
    guint subscription = g_dbus_connection_signal_subscribe(
        self->bus, SETTINGS_BUS_NAME, SETTINGS_INTERFACE, "Changed", SETTINGS_OBJECT_PATH, subscribing->directory,
        G_DBUS_SIGNAL_FLAGS_MATCH_ARG0_PATH, on_changed, self, NULL);
    g_mutex_lock(&self->lock);
    subscribing->subscription = subscription;
    subscribing->done = TRUE;
    g_cond_broadcast(&self->idle);
    g_mutex_unlock(&self->lock);
    return G_SOURCE_REMOVE;
}

// Subscribes to the Changed signals of a directory in the signal thread's context, and waits until it has.
static guint subscribe(SettingsBusBackend *self, const gchar *directory) {
    Subscribing subscribing = {self, directory, 0, FALSE};
    g_main_context_invoke(self->context, subscribe_in_context, &subscribing);
    g_mutex_lock(&self->lock);
    while (!subscribing.done) g_cond_wait(&self->idle, &self->lock);
    g_mutex_unlock(&self->lock);
    return subscribing.subscription;
}

static gpointer run_signal_thread(gpointer data) {
    SettingsBusBackend *self = data;
    g_main_context_push_thread_default(self->context);
    g_main_loop_run(self->loop);
    g_main_context_pop_thread_default(self->context);
    return NULL;
}

// MARK: - Reading

// Says, once for the process, why a directory could not be read (the broker is not there, or refused).
static void warn_unread(SettingsBusBackend *self, const gchar *directory, const GError *error) {
    if (!g_atomic_int_compare_and_exchange(&self->warned_unreachable, 0, 1)) return;
    g_warning("settingsbus: cannot read %s from the settings broker: %s", directory, error->message);
}

// MARK: - The view

static guint64 take_tree_locked(SettingsBusBackend *self, const gchar *directory, GVariant *layers, gboolean own,
                                gboolean direct, GPtrArray *changed);

// The largest view file read: a directory's own keys.
#define VIEW_FILE_LIMIT (16 << 20)
#define VIEW_INTERFACE "io.github.settingsbus.View1"

// The folder of the broker's view: $SETTINGSBUS_VIEW, else $XDG_RUNTIME_DIR/settingsbus/view, if it is a folder of
// this user's that no one else may enter (decision 0037); NULL otherwise.
static gchar *view_folder(void) {
    const gchar *given = g_getenv("SETTINGSBUS_VIEW");
    const gchar *runtime = g_getenv("XDG_RUNTIME_DIR");
    gchar *folder = given && given[0] == '/' ? g_strdup(given)
                    : runtime && runtime[0] == '/' ? g_build_filename(runtime, "settingsbus", "view", NULL)
                                                   : NULL;
    struct stat status;
    if (folder && (lstat(folder, &status) != 0 || !S_ISDIR(status.st_mode) || status.st_uid != getuid() ||
                   (status.st_mode & 0077) != 0))
        g_clear_pointer(&folder, g_free);
    return folder;
}

// The name of a directory's file in the view: `d-` and the 64-bit FNV-1a hash of its path, in hex.
static gchar *view_file_name(const gchar *directory) {
    guint64 hash = G_GUINT64_CONSTANT(0xcbf29ce484222325);
    for (const guchar *byte = (const guchar *) directory; *byte; byte++) {
        hash ^= *byte;
        hash *= G_GUINT64_CONSTANT(0x100000001b3);
    }
    return g_strdup_printf("d-%016" G_GINT64_MODIFIER "x", hash);
}

// The bytes of a regular file of this user's in the view, at most VIEW_FILE_LIMIT (NULL: none such; `missing` is
// set when there is no file of that name).
static GBytes *read_view_file(const gchar *folder, const gchar *name, gboolean *missing) {
    gchar *path = g_build_filename(folder, name, NULL);
    int descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    *missing = descriptor < 0 && errno == ENOENT;
    g_free(path);
    if (descriptor < 0) return NULL;
    struct stat status;
    if (fstat(descriptor, &status) != 0 || !S_ISREG(status.st_mode) || status.st_uid != getuid() ||
        status.st_size > VIEW_FILE_LIMIT) {
        close(descriptor);
        return NULL;
    }
    gsize size = (gsize) status.st_size, done = 0;
    guchar *data = g_malloc(size ? size : 1);
    while (done < size) {
        ssize_t count = read(descriptor, data + done, size - done);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) break;
        done += (gsize) count;
    }
    close(descriptor);
    return g_bytes_new_take(data, done);
}

// A message of the view: a signal of its interface named `member`, whose body is of `type` (NULL: not one).
static GDBusMessage *view_message(GBytes *bytes, const gchar *member, const gchar *type) {
    gsize size = 0;
    const guchar *data = g_bytes_get_data(bytes, &size);
    // GLib reads a whole message from another process: every length and offset is checked before use.
    GDBusMessage *message = size >= 16 ? g_dbus_message_new_from_blob((guchar *) data, size, G_DBUS_CAPABILITY_FLAGS_NONE, NULL)
                                       : NULL;
    if (!message) return NULL;
    GVariant *body = g_dbus_message_get_body(message);
    if (g_dbus_message_get_message_type(message) != G_DBUS_MESSAGE_TYPE_SIGNAL ||
        g_strcmp0(g_dbus_message_get_interface(message), VIEW_INTERFACE) != 0 ||
        g_strcmp0(g_dbus_message_get_member(message), member) != 0 || !body ||
        !g_variant_is_of_type(body, G_VARIANT_TYPE(type)))
        g_clear_object(&message);
    return message;
}

// Reads a directory from the broker's view, if it is complete: `layers` as a read's answer, `(a{sv}a{sv}t)`, and
// the locks under it. FALSE when the view cannot be trusted for it (no view, not complete, a file that is not of
// the directory or not a view's) or does not hold all of it (a secret key's value): the directory is then read
// from the bus.
static gboolean read_view(SettingsBusBackend *self, const gchar *directory, GVariant **layers, gchar ***locks) {
    if (!self->view) return FALSE;
    gboolean missing = FALSE;
    GBytes *complete = read_view_file(self->view, "complete", &missing);
    GDBusMessage *marker = complete ? view_message(complete, "Complete", "(tsss)") : NULL;
    if (complete) g_bytes_unref(complete);
    if (!marker) return FALSE;
    guint64 complete_serial = 0;
    const gchar *bus = NULL, *socket = NULL;
    g_variant_get_child(g_dbus_message_get_body(marker), 0, "t", &complete_serial);
    g_variant_get_child(g_dbus_message_get_body(marker), 2, "&s", &bus);
    g_variant_get_child(g_dbus_message_get_body(marker), 3, "&s", &socket);
    // The view of the broker on this app's bus only: named by its GUID once connected, and before that by the GUID
    // in its address, else by its socket file.
    gboolean same_bus = self->bus ? g_strcmp0(bus, g_dbus_connection_get_guid(self->bus)) == 0
                        : self->bus_guid ? g_strcmp0(bus, self->bus_guid) == 0
                                         : self->bus_socket && socket[0] && g_strcmp0(socket, self->bus_socket) == 0;
    g_object_unref(marker);
    if (!same_bus) return FALSE;
    gchar *name = view_file_name(directory);
    GBytes *bytes = read_view_file(self->view, name, &missing);
    g_free(name);
    if (!bytes) {
        if (!missing) return FALSE;
        // A complete view has no file for a directory that holds nothing.
        *layers = g_variant_ref_sink(g_variant_new("(a{sv}a{sv}t)", NULL, NULL, complete_serial));
        *locks = g_new0(gchar *, 1);
        return TRUE;
    }
    GDBusMessage *message = view_message(bytes, "Directory", "(tsa{sv}a{sv}asa{sv}as)");
    g_bytes_unref(bytes);
    if (!message) return FALSE;
    GVariant *body = g_dbus_message_get_body(message);
    const gchar *named = NULL;
    g_variant_get_child(body, 1, "&s", &named);
    // A directory with secret keys is read from the bus, which gives their values to the user's own apps.
    GVariant *secret = g_variant_get_child_value(body, 6);
    gboolean ours = g_strcmp0(named, directory) == 0 && g_variant_n_children(secret) == 0;
    g_variant_unref(secret);
    if (ours) {
        guint64 serial = 0;
        GVariant *user = g_variant_get_child_value(body, 2), *administrator = g_variant_get_child_value(body, 3);
        g_variant_get_child(body, 0, "t", &serial);
        *layers = g_variant_ref_sink(g_variant_new("(@a{sv}@a{sv}t)", user, administrator, serial));
        g_variant_unref(user);
        g_variant_unref(administrator);
        g_variant_get_child(body, 4, "^as", locks);
    }
    g_object_unref(message);
    return ours;
}

// Takes a directory's first read from the broker's view, if it can be trusted: the copy is then loaded at once,
// with no wait. Its read is still sent on the bus, and taken, announced, when the broker answers: it catches any
// change between the view's file and the watch taking effect. Lock held.
static gboolean load_from_view_locked(SettingsBusBackend *self, const gchar *directory, DirectoryWatch *watch) {
    GVariant *layers = NULL;
    gchar **locks = NULL;
    if (!read_view(self, directory, &layers, &locks)) return FALSE;
    // The view's file holds the directory's own keys: those of the directories below it are not its to drop.
    watch->serial = take_tree_locked(self, directory, layers, TRUE, TRUE, NULL);
    g_variant_unref(layers);
    g_strfreev(watch->locks);
    watch->locks = locks;
    watch->loaded = TRUE;
    watch->from_view = TRUE;
    return TRUE;
}

// Watches a directory (once; `subscribing`: for one more GSettings object) and reads it if it is not read yet:
// when its first read failed, it is read again. Waits for the read, up to BROKER_WAIT_MS (not at all while the
// broker does not answer); a read answered later is taken then, and what it changes is announced. Not called with
// the lock held.
static void load_directory(SettingsBusBackend *self, const gchar *directory, gboolean subscribing) {
    g_mutex_lock(&self->lock);
    if (self->connecting) {
        // The module's thread is connecting to the bus: the directory is left for it to watch and read once it has
        // (connect_in_context), and its first read is taken from the view, with no wait, when the view serves it.
        DirectoryWatch *early = g_hash_table_lookup(self->directories, directory);
        if (!early) {
            early = g_new0(DirectoryWatch, 1);
            g_hash_table_insert(self->directories, g_strdup(directory), early);
        }
        if (subscribing) early->users++;
        subscribing = FALSE;
        if (early->loaded || load_from_view_locked(self, directory, early)) {
            early->announce = TRUE;
            g_mutex_unlock(&self->lock);
            return;
        }
        if (!wait_connected_locked(self)) {
            // Its read, sent once the bus is connected, is taken when it comes, and announced.
            early->announce = TRUE;
            gboolean still = self->connecting;
            g_mutex_unlock(&self->lock);
            if (still) say_bus_unanswering();
            return;
        }
    }
    if (!self->bus) {
        g_mutex_unlock(&self->lock);
        return;
    }
    DirectoryWatch *watch = g_hash_table_lookup(self->directories, directory);
    if (!watch) {
        g_mutex_unlock(&self->lock);
        // Watched before it is read, so that no change falls between the two.
        guint subscription = subscribe(self, directory);
        g_mutex_lock(&self->lock);
        watch = g_hash_table_lookup(self->directories, directory);
        if (watch) {
            // Another thread watched it meanwhile.
            g_dbus_connection_signal_unsubscribe(self->bus, subscription);
        } else {
            watch = g_new0(DirectoryWatch, 1);
            watch->subscription = subscription;
            g_hash_table_insert(self->directories, g_strdup(directory), watch);
        }
    }
    if (subscribing) watch->users++;
    if (!watch->loaded && !watch->reading) {
        gboolean viewed = load_from_view_locked(self, directory, watch);
        read_watch_locked(self, directory, watch);
        if (viewed) {
            // Nothing to wait for: the bus's answer is taken, and announced, when it comes.
            watch->announce = TRUE;
            g_mutex_unlock(&self->lock);
            return;
        }
    }
    gint64 deadline = wait_deadline_locked(self);
    gboolean news = FALSE;
    while (watch && !watch->from_view && (!watch->loaded || watch->reading_locks) &&
           (watch->reading || watch->reading_locks)) {
        if (!g_cond_wait_until(&self->idle, &self->lock, deadline)) {
            // Its read is taken when it comes, and announced.
            watch->announce = TRUE;
            news = mark_unanswering_locked(self);
            break;
        }
        watch = g_hash_table_lookup(self->directories, directory);
    }
    g_mutex_unlock(&self->lock);
    if (news) say_unanswering();
}

// Watches and reads the directory of a key (load_directory).
static void load_directory_of(SettingsBusBackend *self, const gchar *key) {
    gchar *directory = directory_of(key);
    load_directory(self, directory, FALSE);
    g_free(directory);
}

// What a read gives: the value in force (the user's, else the administrator's default), the default (the
// administrator's), or the user's value alone.
typedef enum { READ_VALUE, READ_DEFAULT, READ_USER } ReadLayer;

// A key's value in the copy for a read of `layer` (NULL: none). Lock held.
static GVariant *layer_value_locked(SettingsBusBackend *self, const gchar *key, ReadLayer layer) {
    GVariant *user = layer == READ_DEFAULT ? NULL : g_hash_table_lookup(self->values, key);
    if (user || layer == READ_USER) return user;
    return g_hash_table_lookup(self->administrator, key);
}

static GVariant *read_layer(SettingsBusBackend *self, const gchar *key, const GVariantType *expected_type,
                            ReadLayer layer) {
    // A key in the copy is of a directory read already (a write reads its directory before it changes the copy):
    // one lookup. A key not in the copy of a directory read has no value there (GSettings gives its default): a
    // second lookup, of the directory, without allocating for keys of usual length. Otherwise the key's
    // directory is read first.
    g_mutex_lock(&self->lock);
    GVariant *stored = layer_value_locked(self, key, layer);
    GVariant *value = stored ? read_form(stored, expected_type) : NULL;
    gboolean read_already = stored != NULL;
    if (!stored) {
        gsize length = directory_length(key);
        gchar buffer[256];
        if (length > 0 && length < sizeof buffer) {
            memcpy(buffer, key, length);
            buffer[length] = '\0';
            DirectoryWatch *watch = g_hash_table_lookup(self->directories, buffer);
            read_already = watch && watch->loaded;
        }
    }
    g_mutex_unlock(&self->lock);
    if (read_already) return value;
    load_directory_of(self, key);
    g_mutex_lock(&self->lock);
    stored = layer_value_locked(self, key, layer);
    value = stored ? read_form(stored, expected_type) : NULL;
    g_mutex_unlock(&self->lock);
    return value;
}

static GVariant *settings_bus_backend_read(GSettingsBackend *backend, const gchar *key,
                                           const GVariantType *expected_type, gboolean default_value) {
    // The default is the administrator's, else GSettings' own (NULL).
    return read_layer(SETTINGS_BUS_BACKEND(backend), key, expected_type, default_value ? READ_DEFAULT : READ_VALUE);
}

static gboolean is_locked(SettingsBusBackend *self, const gchar *key);

// The user's value of a key an administrator locked, which the broker keeps but does not serve (the copy has no
// value of the user's for it), as dconf keeps it in the user's database: Describe's `value` (NULL: none).
static GVariant *held_user_value(SettingsBusBackend *self, const gchar *key, const GVariantType *expected_type) {
    if (!is_locked(self, key)) return NULL;
    GVariant *reply = call_broker(self, "Describe", g_variant_new("(s)", key), "(a{sv})", NULL);
    if (!reply) return NULL;
    GVariant *fields = g_variant_get_child_value(reply, 0);
    GVariant *stored = g_variant_lookup_value(fields, "value", NULL);
    GVariant *value = stored ? read_form(stored, expected_type) : NULL;
    if (stored) g_variant_unref(stored);
    g_variant_unref(fields);
    g_variant_unref(reply);
    return value;
}

static GVariant *settings_bus_backend_read_user_value(GSettingsBackend *backend, const gchar *key,
                                                      const GVariantType *expected_type) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    GVariant *value = read_layer(self, key, expected_type, READ_USER);
    return value || !bus_ready(self) ? value : held_user_value(self, key, expected_type);
}

static void settings_bus_backend_subscribe(GSettingsBackend *backend, const gchar *name) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    gchar *directory = g_str_has_suffix(name, "/") ? g_strdup(name) : directory_of(name);
    load_directory(self, directory, TRUE);
    g_free(directory);
}

// Removes what the copy holds of a directory's own keys, but those with a write in flight (finish_write removes
// them after it). Lock held.
static void forget_directory_locked(SettingsBusBackend *self, const gchar *directory) {
    GHashTable *tables[] = {self->values, self->confirmed, self->administrator, self->writability};
    for (gsize index = 0; index < G_N_ELEMENTS(tables); index++) {
        GHashTableIter iter;
        gpointer key;
        g_hash_table_iter_init(&iter, tables[index]);
        while (g_hash_table_iter_next(&iter, &key, NULL))
            if (key_of_directory(key, directory) && in_flight_locked(self, key) == 0) g_hash_table_iter_remove(&iter);
    }
}

// When the last GSettings object of a directory goes, so do its watch (the match rule on the bus) and its copy:
// a GSettings object made for it again reads it again.
static void settings_bus_backend_unsubscribe(GSettingsBackend *backend, const gchar *name) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    gchar *directory = g_str_has_suffix(name, "/") ? g_strdup(name) : directory_of(name);
    g_mutex_lock(&self->lock);
    DirectoryWatch *watch = g_hash_table_lookup(self->directories, directory);
    if (watch && watch->users > 0 && --watch->users == 0) {
        // (A directory watched while the bus was being connected has no subscription until it is.)
        if (watch->subscription) g_dbus_connection_signal_unsubscribe(self->bus, watch->subscription);
        g_hash_table_remove(self->directories, directory);
        forget_directory_locked(self, directory);
    }
    g_mutex_unlock(&self->lock);
    g_free(directory);
}

// Takes a read of `directory`, `(a{sv}a{sv}t)`: the values of its own keys (`own`: a watched directory's read), or
// of the keys of every watched directory at or below it (a read again: a Changed that carried no values, secret
// keys or a commit too large to list; or one of the administrator's). A key the read does not list has no value
// of the user's (`direct`: a read of the directory's own keys alone, the view's, says nothing of the keys below
// it). Each key whose copy changed is added to `changed` (NULL: not collected). Returns the read's serial. Lock
// held.
static guint64 take_tree_locked(SettingsBusBackend *self, const gchar *directory, GVariant *layers, gboolean own,
                                gboolean direct, GPtrArray *changed) {
    GVariantIter *values = NULL;
    GVariant *defaults = NULL;
    guint64 serial = 0;
    g_variant_get(layers, "(a{sv}@a{sv}t)", &values, &defaults, &serial);
    GHashTable *fresh = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_variant_unref);
    const gchar *key = NULL;
    GVariant *value = NULL;
    while (g_variant_iter_loop(values, "{&sv}", &key, &value)) {
        if (valid_key(key) && g_str_has_prefix(key, directory))
            g_hash_table_insert(fresh, g_strdup(key), g_variant_ref(value));
        else
            drop_entry("a value of", key);
    }
    g_variant_iter_free(values);
    GHashTableIter iter;
    gpointer held_key, held_value;
    // Keys below the directory that went.
    GPtrArray *gone = g_ptr_array_new_with_free_func(g_free);
    g_hash_table_iter_init(&iter, self->confirmed);
    while (g_hash_table_iter_next(&iter, &held_key, &held_value))
        if (g_str_has_prefix(held_key, directory) && !g_hash_table_contains(fresh, held_key) &&
            (!direct || key_of_directory(held_key, directory)))
            g_ptr_array_add(gone, g_strdup(held_key));
    for (guint index = 0; index < gone->len; index++)
        confirm_locked(self, gone->pdata[index], NULL, serial, TRUE, changed);
    g_ptr_array_unref(gone);
    // Only keys of directories watched: the copy holds no other (a read of one finds its directory unread).
    g_hash_table_iter_init(&iter, fresh);
    while (g_hash_table_iter_next(&iter, &held_key, &held_value)) {
        gboolean taken;
        if (own) {
            taken = key_of_directory(held_key, directory);
        } else {
            gchar *key_directory = directory_of(held_key);
            taken = g_hash_table_contains(self->directories, key_directory);
            g_free(key_directory);
        }
        if (taken) confirm_locked(self, held_key, held_value, serial, TRUE, changed);
    }
    take_administrator_locked(self, directory, defaults, !own, direct, changed);
    g_variant_unref(defaults);
    g_hash_table_unref(fresh);
    return serial;
}

// A read's answer, on GDBus's thread (the connection's filter): taken (keys whose copy changed are added to
// `changed`, for a watched directory's read only when it is announced), or the next read method asked of an
// older broker. `error` is set when the read failed. Lock held.
static void take_read_locked(SettingsBusBackend *self, BrokerCall *call, guint32 serial, GDBusMessage *message,
                             GPtrArray *changed, GError **error) {
    DirectoryWatch *watch = call->again ? NULL : g_hash_table_lookup(self->directories, call->directory);
    // A watch dropped since, or read again since.
    if (!call->again && (!watch || watch->reading != serial)) return;
    GError *failure = NULL;
    GVariant *layers = NULL;
    if (!g_dbus_message_to_gerror(message, &failure)) {
        GVariant *body = g_dbus_message_get_body(message);
        if (call->method == 0 && body && g_variant_is_of_type(body, G_VARIANT_TYPE("(a{sv}a{sv}t)"))) {
            layers = g_variant_ref(body);
        } else if (call->method > 0 && body && g_variant_is_of_type(body, G_VARIANT_TYPE("(a{sv}t)"))) {
            GVariant *values = g_variant_get_child_value(body, 0);
            guint64 read_serial = 0;
            g_variant_get_child(body, 1, "t", &read_serial);
            layers = g_variant_ref_sink(
                g_variant_new("(@a{sv}@a{sv}t)", values, g_variant_new("a{sv}", NULL), read_serial));
            g_variant_unref(values);
        } else {
            failure = g_error_new(G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "the broker's answer to %s is not of its type",
                                  read_methods[call->method]);
        }
    } else if (g_error_matches(failure, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD) &&
               call->method + 1 < G_N_ELEMENTS(read_methods)) {
        guint32 next = send_read_locked(self, call->directory, call->method + 1, call->again);
        if (watch) watch->reading = next;
        g_error_free(failure);
        return;
    }
    if (watch) watch->reading = 0;
    if (failure) {
        g_propagate_error(error, failure);
        return;
    }
    guint64 read_serial = take_tree_locked(self, call->directory, layers, !call->again, FALSE,
                                           !watch || watch->announce ? changed : NULL);
    if (watch) {
        watch->serial = read_serial;
        watch->loaded = TRUE;
        watch->announce = FALSE;
    }
    g_variant_unref(layers);
}

// A watched directory's lock list, on GDBus's thread (a broker older than Locks answers UnknownMethod: the writes
// are then judged by the broker alone). Lock held.
static void take_locks_locked(SettingsBusBackend *self, BrokerCall *call, guint32 serial, GDBusMessage *message) {
    DirectoryWatch *watch = g_hash_table_lookup(self->directories, call->directory);
    if (!watch || watch->reading_locks != serial) return;
    watch->reading_locks = 0;
    GVariant *body = g_dbus_message_get_body(message);
    if (g_dbus_message_get_message_type(message) != G_DBUS_MESSAGE_TYPE_METHOD_RETURN || !body ||
        !g_variant_is_of_type(body, G_VARIANT_TYPE("(as)")))
        return;
    g_strfreev(watch->locks);
    g_variant_get(body, "(^as)", &watch->locks);
}

// Whether a Changed's path concerns a watched directory: the path is in it, or is a directory above it (the rule
// arg0path matches the same). Lock held.
static gboolean path_watched_locked(SettingsBusBackend *self, const gchar *path) {
    gboolean above = g_str_has_suffix(path, "/");
    GHashTableIter iter;
    gpointer directory;
    g_hash_table_iter_init(&iter, self->directories);
    while (g_hash_table_iter_next(&iter, &directory, NULL))
        if (g_str_has_prefix(path, directory) || (above && g_str_has_prefix(directory, path))) return TRUE;
    return FALSE;
}

// Puts a key's value from a Changed signal in the copy (NULL: removed), and adds the key to `changed` when the
// copy changed: only keys of directories in use, and changes the directory's read did not see already. Lock held.
static void take_change_locked(SettingsBusBackend *self, const gchar *key, GVariant *value, guint64 serial,
                               GPtrArray *changed) {
    gchar *directory = directory_of(key);
    DirectoryWatch *watch = g_hash_table_lookup(self->directories, directory);
    g_free(directory);
    if (watch && serial > watch->serial) confirm_locked(self, key, value, serial, TRUE, changed);
}

// The broker that answers is not the one the copy came from: a new owner of its name, or a serial that went back
// (a store restored from its backup). Every watched directory is read again, with what changes announced, and no
// serial known before holds; what was known of writability is asked again. Lock held.
static void read_all_again_locked(SettingsBusBackend *self) {
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, self->confirmed);
    while (g_hash_table_iter_next(&iter, NULL, &value)) ((Confirmed *) value)->serial = 0;
    g_hash_table_remove_all(self->writability);
    self->newest_serial = 0;
    g_hash_table_iter_init(&iter, self->directories);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        DirectoryWatch *watch = value;
        // A first read sent while the name had no owner goes to the new one (it started the broker by D-Bus
        // activation): it stands, and what it reads is the copy's first.
        BrokerCall *out = watch->reading ? g_hash_table_lookup(self->calls, GUINT_TO_POINTER(watch->reading)) : NULL;
        if (!watch->loaded && out && !out->to) continue;
        watch->serial = 0;
        watch->announce = TRUE;
        // A read already out is superseded: its answer is not taken.
        read_watch_locked(self, key, watch);
    }
}

// Takes a Changed(path, values, removed, serial, origin) signal of `sender`, on GDBus's thread (the connection's
// filter), in the order of the bus: only from the owner of the broker's name. A key left without a value of the
// user's is in both lists (version 4 for a schema's default, 5 for the administrator's): it is taken as removed
// (its value is not taken), and reads the administrator's default, else GSettings' own. A signal without values
// (secret keys, or a commit too large to list), or of the administrator's (what a key reads may now be a default
// or lock of theirs, which the signal's values do not tell from the user's), has the path read again.
static void take_changed(SettingsBusBackend *self, const gchar *sender, GVariant *parameters) {
    if (!parameters || !g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sa{sv}asts)"))) return;
    const gchar *path = NULL;
    GVariantIter *values = NULL;
    GVariantIter *removed = NULL;
    guint64 serial = 0;
    const gchar *origin = NULL;
    g_variant_get(parameters, "(&sa{sv}ast&s)", &path, &values, &removed, &serial, &origin);
    if (!valid_key(path) && !valid_directory(path)) {
        drop_entry("a change of", path);
        g_variant_iter_free(values);
        g_variant_iter_free(removed);
        return;
    }
    gsize count = g_variant_iter_n_children(values) + g_variant_iter_n_children(removed);
    GPtrArray *changed = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&self->lock);
    // Only the signals of the broker's name's owner count: the subscriptions' match rules are resolved by the bus
    // daemon to the owner when it routes them, but another of the app's rules may route anyone's to the filter.
    gboolean from_owner = sender && g_strcmp0(sender, self->owner) == 0;
    gboolean administrator = g_strcmp0(origin, "administrator") == 0;
    if (from_owner && serial < self->newest_serial) read_all_again_locked(self);
    if (from_owner) self->newest_serial = serial;
    const gchar *key = NULL;
    GVariant *value = NULL;
    if (from_owner && (count == 0 || administrator)) {
        if (path_watched_locked(self, path)) {
            gchar *directory = g_str_has_suffix(path, "/") ? g_strdup(path) : directory_of(path);
            send_read_locked(self, directory, 0, TRUE);
            g_free(directory);
        }
    } else if (from_owner) {
        // A key in both lists is taken as removed alone: taking its value first would change the copy twice, and
        // the app would hear two `changed`.
        GHashTable *gone = NULL;
        if (g_variant_iter_n_children(removed) > 0) {
            gone = g_hash_table_new(g_str_hash, g_str_equal);
            GVariantIter *listed = g_variant_iter_copy(removed);
            while (g_variant_iter_next(listed, "&s", &key))
                if (valid_key(key)) g_hash_table_add(gone, (gpointer) key);
            g_variant_iter_free(listed);
        }
        while (g_variant_iter_loop(values, "{&sv}", &key, &value)) {
            if (!valid_key(key))
                drop_entry("a changed value of", key);
            else if (!gone || !g_hash_table_contains(gone, key))
                take_change_locked(self, key, value, serial, changed);
        }
        if (gone) g_hash_table_unref(gone);
        while (g_variant_iter_loop(removed, "&s", &key)) {
            if (valid_key(key))
                take_change_locked(self, key, NULL, serial, changed);
            else
                drop_entry("a removal of", key);
        }
    }
    g_mutex_unlock(&self->lock);
    for (guint index = 0; index < changed->len; index++)
        g_settings_backend_changed(G_SETTINGS_BACKEND(self), changed->pdata[index], NULL);
    g_variant_iter_free(values);
    g_variant_iter_free(removed);
    g_ptr_array_unref(changed);
}

// The subscription's Changed, on the signal thread: nothing to do. The subscription holds the match rule (arg0path)
// by which the bus daemon routes the broker's Changed signals of a directory to the app; the connection's filter
// takes each one as it arrives (take_changed).
static void on_changed(GDBusConnection *bus, const gchar *sender, const gchar *object_path,
                       const gchar *interface_name, const gchar *signal_name, GVariant *parameters, gpointer data) {
    (void) bus, (void) sender, (void) object_path, (void) interface_name, (void) signal_name, (void) parameters;
    (void) data;
}

// The connection's filter, on GDBus's thread: the broker's answers to writes (take_reply), and its Changed
// signals. A Changed of the broker reaches the copy and the app's `changed`
// handlers without waiting for the signal thread (one thread hop less, as dconf's engine takes its signals). The
// bus daemon routes the signals by the subscriptions' match rules; the filter only looks at them sooner.
static GDBusMessage *filter_changed(GDBusConnection *bus, GDBusMessage *message, gboolean incoming, gpointer data) {
    (void) bus;
    if (!incoming) return message;
    GDBusMessageType type = g_dbus_message_get_message_type(message);
    if (type == G_DBUS_MESSAGE_TYPE_METHOD_RETURN || type == G_DBUS_MESSAGE_TYPE_ERROR) {
        // The answer to one of the module's calls: taken here (and dropped), since nothing in GDBus waits for it.
        FilterTarget *target = data;
        g_mutex_lock(&target->lock);
        gboolean taken = target->backend && take_reply(target->backend, message);
        g_mutex_unlock(&target->lock);
        if (taken) g_object_unref(message);
        return taken ? NULL : message;
    }
    if (type == G_DBUS_MESSAGE_TYPE_SIGNAL && g_strcmp0(g_dbus_message_get_path(message), "/org/freedesktop/DBus") == 0) {
        FilterTarget *target = data;
        g_mutex_lock(&target->lock);
        if (target->backend) take_owner_change(target->backend, message);
        g_mutex_unlock(&target->lock);
        return message;
    }
    if (type != G_DBUS_MESSAGE_TYPE_SIGNAL ||
        g_strcmp0(g_dbus_message_get_member(message), "Changed") != 0 ||
        g_strcmp0(g_dbus_message_get_interface(message), SETTINGS_INTERFACE) != 0 ||
        g_strcmp0(g_dbus_message_get_path(message), SETTINGS_OBJECT_PATH) != 0)
        return message;
    FilterTarget *target = data;
    g_mutex_lock(&target->lock);
    if (target->backend)
        take_changed(target->backend, g_dbus_message_get_sender(message), g_dbus_message_get_body(message));
    g_mutex_unlock(&target->lock);
    return message;
}

// DescriptionChanged(path, keys, serial, origin): the writability of these keys may have changed.
static void on_description_changed(GDBusConnection *bus, const gchar *sender, const gchar *object_path,
                                   const gchar *interface_name, const gchar *signal_name, GVariant *parameters,
                                   gpointer data) {
    (void) bus, (void) object_path, (void) interface_name, (void) signal_name;
    SettingsBusBackend *self = data;
    if (!g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sast)")) &&
        !g_variant_is_of_type(parameters, G_VARIANT_TYPE("(sasts)")))
        return;
    g_mutex_lock(&self->lock);
    gboolean from_owner = sender && g_strcmp0(sender, self->owner) == 0;
    g_mutex_unlock(&self->lock);
    if (!from_owner) return;
    GVariantIter *keys = NULL;
    const gchar *key = NULL;
    g_variant_get_child(parameters, 1, "as", &keys);
    GPtrArray *changed = g_ptr_array_new_with_free_func(g_free);
    // The keys the process uses: those it asked the writability of, and those of the directories its GSettings
    // objects read (each subscribes to its path). A broker that registers GNOME's schemas names thousands of keys
    // at once; each key announced costs a closure per GSettings object, queued to the object's main context.
    g_mutex_lock(&self->lock);
    while (g_variant_iter_loop(keys, "&s", &key)) {
        if (!valid_key(key)) {
            drop_entry("a description change of", key);
            continue;
        }
        gchar *directory = directory_of(key);
        DirectoryWatch *watch = g_hash_table_lookup(self->directories, directory);
        // A lock added or lifted: the directory's list is out of date; Describe answers until it is read again.
        if (watch) g_clear_pointer(&watch->locks, g_strfreev);
        gboolean in_use = g_hash_table_remove(self->writability, key) || watch != NULL;
        g_free(directory);
        if (in_use) g_ptr_array_add(changed, g_strdup(key));
    }
    g_mutex_unlock(&self->lock);
    for (guint index = 0; index < changed->len; index++)
        g_settings_backend_writable_changed(G_SETTINGS_BACKEND(self), changed->pdata[index]);
    g_variant_iter_free(keys);
    g_ptr_array_unref(changed);
}

// MARK: - Writability

// What the key's directory's lock list says of a key, with the lock held: LOCKED, WRITABLE, or 0 when the list
// is not known (the directory not read, or a lock changed since).
static gint listed_writability_locked(SettingsBusBackend *self, const gchar *key) {
    gchar *directory = directory_of(key);
    DirectoryWatch *watch = g_hash_table_lookup(self->directories, directory);
    g_free(directory);
    if (!watch || !watch->locks) return 0;
    for (gchar **lock = watch->locks; *lock; lock++) {
        gsize length = strlen(*lock);
        gboolean holds = length > 0 && (*lock)[length - 1] == '/' ? g_str_has_prefix(key, *lock) : strcmp(key, *lock) == 0;
        if (holds) return LOCKED;
    }
    return WRITABLE;
}

// What the module knows of a key's writability, with the lock held: what Describe said of it, else what its
// directory's lock list says (LOCKED, WRITABLE, or 0 when neither is known).
static gint known_writability_locked(SettingsBusBackend *self, const gchar *key) {
    gint known = GPOINTER_TO_INT(g_hash_table_lookup(self->writability, key));
    return known ? known : listed_writability_locked(self, key);
}

static gboolean settings_bus_backend_get_writable(GSettingsBackend *backend, const gchar *key) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    if (!bus_ready(self)) return FALSE;
    g_mutex_lock(&self->lock);
    gint known = known_writability_locked(self, key);
    g_mutex_unlock(&self->lock);
    if (known) return known == WRITABLE;
    GError *error = NULL;
    GVariant *reply = call_broker(self, "Describe", g_variant_new("(s)", key), "(a{sv})", &error);
    gboolean writable = TRUE;
    if (!reply) {
        // A key the broker knows nothing of (no value, no schema, no lock) is writable. Any other failure: say
        // writable without keeping it, and let the broker be the judge of the write.
        gchar *remote = g_dbus_error_get_remote_error(error);
        gboolean unknown = remote && strcmp(remote, SETTINGS_INTERFACE ".Error.UnknownKey") == 0;
        g_free(remote);
        g_error_free(error);
        if (!unknown) return TRUE;
    } else {
        GVariant *fields = g_variant_get_child_value(reply, 0);
        g_variant_lookup(fields, "writable", "b", &writable);
        g_variant_unref(fields);
        g_variant_unref(reply);
    }
    g_mutex_lock(&self->lock);
    g_hash_table_insert(self->writability, g_strdup(key), GINT_TO_POINTER(writable ? WRITABLE : LOCKED));
    g_mutex_unlock(&self->lock);
    return writable;
}

static GPermission *settings_bus_backend_get_permission(GSettingsBackend *backend, const gchar *path) {
    (void) backend;
    (void) path;
    // Locks are per key (get_writable); the broker is the judge of each write.
    return g_simple_permission_new(TRUE);
}

// MARK: - Writing

static void pending_write_free(PendingWrite *write) {
    g_free(write->key);
    g_free(write->to);
    if (write->value) g_variant_unref(write->value);
    if (write->arguments) g_variant_unref(write->arguments);
    g_hash_table_unref(write->written);
    g_free(write);
}

static PendingWrite *pending_write_new(void) {
    PendingWrite *write = g_new0(PendingWrite, 1);
    write->written = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, variant_unref_or_null);
    return write;
}

// Changes a key in the copy for a write, which is then in flight. Lock held.
static void stage_locked(SettingsBusBackend *self, PendingWrite *write, const gchar *key, GVariant *stored) {
    if (!g_hash_table_contains(write->written, key))
        g_hash_table_insert(self->in_flight, g_strdup(key), GUINT_TO_POINTER(in_flight_locked(self, key) + 1));
    g_hash_table_insert(write->written, g_strdup(key), stored ? g_variant_ref(stored) : NULL);
    put_locked(self, key, stored);
}

// Ends a write the broker answered: its keys are no longer in flight. An accepted write (`serial` of its commit)
// is the broker's value of its keys at that serial. A key with no other write in flight reads the broker's newest
// value: the write's own, one a later commit gave, or, after a refusal, what it had before.
static void finish_write(SettingsBusBackend *self, PendingWrite *write, guint64 serial, const GError *error) {
    GPtrArray *changed = g_ptr_array_new_with_free_func(g_free);
    g_mutex_lock(&self->lock);
    GHashTableIter iter;
    gpointer key, written;
    g_hash_table_iter_init(&iter, write->written);
    while (g_hash_table_iter_next(&iter, &key, &written)) {
        guint count = in_flight_locked(self, key);
        if (count > 1)
            g_hash_table_insert(self->in_flight, g_strdup(key), GUINT_TO_POINTER(count - 1));
        else
            g_hash_table_remove(self->in_flight, key);
        if (!error) confirm_locked(self, key, written, serial, FALSE, changed);
        if (count > 1) continue;
        Confirmed *known = g_hash_table_lookup(self->confirmed, key);
        if (put_locked(self, key, known ? known->value : NULL)) g_ptr_array_add(changed, g_strdup(key));
        // A key of a directory no longer watched (its last GSettings object went while the write was out) leaves
        // the copy: a new GSettings object reads it again.
        gchar *directory = directory_of(key);
        if (!g_hash_table_contains(self->directories, directory)) {
            g_hash_table_remove(self->values, key);
            g_hash_table_remove(self->confirmed, key);
        }
        g_free(directory);
    }
    if (error) self->unstored++;
    g_mutex_unlock(&self->lock);
    if (error) {
        gchar *remote = g_dbus_error_get_remote_error(error);
        if (remote)
            g_warning("settingsbus: the settings broker refused a write of %s: %s: %s",
                      write->key ? write->key : "several keys", remote, error->message);
        else
            g_warning("settingsbus: a write of %s to the settings broker failed, and is undone: %s",
                      write->key ? write->key : "several keys", error->message);
        g_free(remote);
    }
    for (guint index = 0; index < changed->len; index++)
        g_settings_backend_changed(G_SETTINGS_BACKEND(self), changed->pdata[index], NULL);
    g_ptr_array_unref(changed);
}

// Ends a write: `reply` is the broker's answer (NULL: none came, `error` says why).
static void end_write(SettingsBusBackend *self, PendingWrite *write, GDBusMessage *reply, const GError *error) {
    GError *refusal = NULL;
    guint64 serial = 0;
    if (reply && !g_dbus_message_to_gerror(reply, &refusal)) {
        GVariant *body = g_dbus_message_get_body(reply);
        if (body && g_variant_is_of_type(body, G_VARIANT_TYPE("(t)")))
            g_variant_get(body, "(t)", &serial);
        else
            refusal = g_error_new(G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS, "the broker's answer is not a serial");
    }
    finish_write(self, write, serial, refusal ? refusal : error);
    g_clear_error(&refusal);
    pending_write_free(write);
    g_mutex_lock(&self->lock);
    self->pending--;
    if (self->pending == 0) g_cond_broadcast(&self->idle);
    g_mutex_unlock(&self->lock);
}

// The broker's answer to a write, on GDBus's thread (the connection's filter); FALSE for any other message.
// Whether an answer comes from the broker that a call was sent to: its owner then (`to`) or now, or the bus
// daemon (which answers for a broker that is not there, or left without answering). Lock held.
static gboolean from_broker_locked(SettingsBusBackend *self, const gchar *sender, const gchar *to) {
    if (!sender) return FALSE;
    return strcmp(sender, BUS_DAEMON) == 0 || g_strcmp0(sender, to) == 0 || g_strcmp0(sender, self->owner) == 0;
}

// Says, once for the process, that an answer to one of the module's calls came from another connection than the
// broker's, and was dropped.
static void drop_answer(const gchar *sender) {
    static gint warned = 0;
    if (!g_atomic_int_compare_and_exchange(&warned, 0, 1)) return;
    g_warning("settingsbus: dropped an answer from %s, which does not own " SETTINGS_BUS_NAME
              "; later ones are dropped without a word",
              sender ? sender : "an unnamed peer");
}

// The owner of the broker's name, from GetNameOwner's answer or NameOwnerChanged (empty or NULL: none). Lock held.
static void take_owner_locked(SettingsBusBackend *self, const gchar *owner) {
    g_free(self->owner);
    self->owner = owner && *owner ? g_strdup(owner) : NULL;
}

// An answer to one of the module's calls (a write, a call a thread waits for, GetNameOwner), on GDBus's thread
// (the connection's filter): taken only from the broker, dropped from anyone else. FALSE for any other message.
static gboolean take_reply(SettingsBusBackend *self, GDBusMessage *message) {
    guint32 reply_serial = g_dbus_message_get_reply_serial(message);
    gpointer serial = GUINT_TO_POINTER(reply_serial);
    const gchar *sender = g_dbus_message_get_sender(message);
    g_mutex_lock(&self->lock);
    if (reply_serial != 0 && reply_serial == self->owner_serial) {
        gboolean from_daemon = g_strcmp0(sender, BUS_DAEMON) == 0;
        if (from_daemon) {
            GVariant *body = g_dbus_message_get_body(message);
            const gchar *owner = NULL;
            if (g_dbus_message_get_message_type(message) == G_DBUS_MESSAGE_TYPE_METHOD_RETURN && body &&
                g_variant_is_of_type(body, G_VARIANT_TYPE("(s)")))
                g_variant_get(body, "(&s)", &owner);
            take_owner_locked(self, owner);
            self->owner_serial = 0;
        }
        g_mutex_unlock(&self->lock);
        if (!from_daemon) drop_answer(sender);
        return TRUE;
    }
    BrokerCall *call = g_hash_table_lookup(self->calls, serial);
    PendingWrite *write = call ? NULL : g_hash_table_lookup(self->replies, serial);
    if (!call && !write) {
        g_mutex_unlock(&self->lock);
        return FALSE;
    }
    if (!from_broker_locked(self, sender, call ? call->to : write->to)) {
        g_mutex_unlock(&self->lock);
        drop_answer(sender);
        return TRUE;
    }
    // The broker answers (or the bus daemon for it): threads wait for it again.
    self->unanswering = FALSE;
    if (write) {
        g_hash_table_remove(self->replies, serial);
        g_mutex_unlock(&self->lock);
        end_write(self, write, message, NULL);
        return TRUE;
    }
    g_hash_table_remove(self->calls, serial);
    if (call->kind == CALL_WAITED) {
        call->reply = g_object_ref(message);
        call->done = TRUE;
        g_cond_broadcast(&self->idle);
        g_mutex_unlock(&self->lock);
        return TRUE;
    }
    GPtrArray *changed = g_ptr_array_new_with_free_func(g_free);
    GError *error = NULL;
    if (call->kind == CALL_READ)
        take_read_locked(self, call, reply_serial, message, changed, &error);
    else
        take_locks_locked(self, call, reply_serial, message);
    // A thread may wait for the directory.
    g_cond_broadcast(&self->idle);
    g_mutex_unlock(&self->lock);
    if (error) {
        warn_unread(self, call->directory, error);
        g_error_free(error);
    }
    for (guint index = 0; index < changed->len; index++)
        g_settings_backend_changed(G_SETTINGS_BACKEND(self), changed->pdata[index], NULL);
    g_ptr_array_unref(changed);
    broker_call_free(call);
    return TRUE;
}

// NameOwnerChanged for the broker's name, from the bus daemon, on GDBus's thread; FALSE for any other message.
static gboolean take_owner_change(SettingsBusBackend *self, GDBusMessage *message) {
    if (g_strcmp0(g_dbus_message_get_sender(message), BUS_DAEMON) != 0 ||
        g_strcmp0(g_dbus_message_get_member(message), "NameOwnerChanged") != 0 ||
        g_strcmp0(g_dbus_message_get_interface(message), BUS_DAEMON) != 0)
        return FALSE;
    GVariant *body = g_dbus_message_get_body(message);
    if (!body || !g_variant_is_of_type(body, G_VARIANT_TYPE("(sss)"))) return FALSE;
    const gchar *name = NULL, *old_owner = NULL, *new_owner = NULL;
    g_variant_get(body, "(&s&s&s)", &name, &old_owner, &new_owner);
    if (strcmp(name, SETTINGS_BUS_NAME) != 0) return FALSE;
    g_mutex_lock(&self->lock);
    gboolean other = *new_owner && g_strcmp0(new_owner, self->owner) != 0;
    take_owner_locked(self, new_owner);
    // A new broker (started again, perhaps on an older store, or taking the name over): what the copy holds came
    // from another one.
    if (other) {
        self->unanswering = FALSE;
        read_all_again_locked(self);
    }
    g_mutex_unlock(&self->lock);
    return FALSE;
}

// Every second while writes wait for an answer, on the signal thread: ends those past their time (the broker is
// stuck; one that went away gets an error from the bus daemon instead), and stops when none waits.
static gboolean end_late_writes(gpointer data) {
    SettingsBusBackend *self = data;
    GPtrArray *late = g_ptr_array_new();
    gint64 now = g_get_monotonic_time();
    g_mutex_lock(&self->lock);
    GHashTableIter iter;
    gpointer serial, write;
    g_hash_table_iter_init(&iter, self->replies);
    while (g_hash_table_iter_next(&iter, &serial, &write)) {
        if (((PendingWrite *) write)->deadline > now) continue;
        g_ptr_array_add(late, write);
        g_hash_table_iter_remove(&iter);
    }
    gboolean waiting = g_hash_table_size(self->replies) > 0;
    if (!waiting) g_clear_pointer(&self->reply_timer, g_source_unref);
    g_mutex_unlock(&self->lock);
    GError *timeout = g_error_new(G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "no answer within %d s", CALL_TIMEOUT_MS / 1000);
    for (guint index = 0; index < late->len; index++) end_write(self, late->pdata[index], NULL, timeout);
    g_error_free(timeout);
    g_ptr_array_unref(late);
    return waiting ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

// Sends a write to the broker from the calling thread, without waiting: the writes of a process are sent, and
// committed by the broker, in the order they are made. Its answer is taken by the connection's filter.
static void send_write(SettingsBusBackend *self, PendingWrite *write) {
    const gchar *method = NULL;
    GVariant *arguments = NULL;
    switch (write->kind) {
    case WRITE_SET:
        method = "Set";
        arguments = g_variant_new("(sv)", write->key, write->value);
        break;
    case WRITE_RESET:
        method = "Reset";
        arguments = g_variant_new("(s)", write->key);
        break;
    case WRITE_APPLY:
        method = "Apply";
        arguments = write->arguments;
        break;
    }
    GDBusMessage *message =
        g_dbus_message_new_method_call(SETTINGS_BUS_NAME, SETTINGS_OBJECT_PATH, SETTINGS_INTERFACE, method);
    g_dbus_message_set_body(message, arguments);
    write->deadline = g_get_monotonic_time() + (gint64) CALL_TIMEOUT_MS * 1000;
    GError *error = NULL;
    guint32 serial = 0;
    // Sent with the lock held, so that the answer (on GDBus's thread) finds the write.
    g_mutex_lock(&self->lock);
    write->to = g_strdup(self->owner);
    gboolean sent =
        g_dbus_connection_send_message(self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, &serial, &error);
    if (sent) {
        g_hash_table_insert(self->replies, GUINT_TO_POINTER(serial), write);
        if (!self->reply_timer) {
            self->reply_timer = g_timeout_source_new_seconds(1);
            g_source_set_callback(self->reply_timer, end_late_writes, self, NULL);
            g_source_attach(self->reply_timer, self->context);
        }
    }
    g_mutex_unlock(&self->lock);
    g_object_unref(message);
    if (!sent) {
        end_write(self, write, NULL, error);
        g_error_free(error);
    }
}

// Whether a write cannot be stored now: the broker does not answer (a write would be undone, unanswered).
static gboolean unanswering(SettingsBusBackend *self) {
    g_mutex_lock(&self->lock);
    gboolean unanswering = self->unanswering;
    g_mutex_unlock(&self->lock);
    return unanswering;
}

// Whether the key is known to be locked: by an earlier get_writable, or by its directory's lock list.
static gboolean is_locked(SettingsBusBackend *self, const gchar *key) {
    g_mutex_lock(&self->lock);
    gint known = known_writability_locked(self, key);
    g_mutex_unlock(&self->lock);
    return known == LOCKED;
}

static gboolean settings_bus_backend_write(GSettingsBackend *backend, const gchar *key, GVariant *value,
                                           gpointer origin_tag) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    // Its directory is read first (a GSettings object has read it already): its lock list says whether the key
    // is locked, even in a process that never asked.
    load_directory_of(self, key);
    if (!bus_ready(self) || is_locked(self, key) || unanswering(self)) {
        g_variant_ref_sink(value);
        g_variant_unref(value);
        return FALSE;
    }
    PendingWrite *write = pending_write_new();
    write->kind = WRITE_SET;
    write->key = g_strdup(key);
    write->value = stored_form(value);
    g_mutex_lock(&self->lock);
    stage_locked(self, write, key, write->value);
    self->pending++;
    g_mutex_unlock(&self->lock);
    g_settings_backend_changed(backend, key, origin_tag);
    send_write(self, write);
    return TRUE;
}

typedef struct {
    SettingsBusBackend *self;
    PendingWrite *write;
    GVariantBuilder *sets;
    GVariantBuilder *resets;
    gboolean locked;
} TreeWrite;

static gboolean check_tree_key(gpointer key, gpointer value, gpointer data) {
    (void) value;
    TreeWrite *tree = data;
    if (is_locked(tree->self, key)) tree->locked = TRUE;
    return tree->locked;
}

static gboolean stage_tree_key(gpointer key, gpointer value, gpointer data) {
    TreeWrite *tree = data;
    if (value) {
        GVariant *stored = stored_form(value);
        g_variant_builder_add(tree->sets, "{sv}", key, stored);
        stage_locked(tree->self, tree->write, key, stored);
        g_variant_unref(stored);
    } else {
        g_variant_builder_add(tree->resets, "s", key);
        stage_locked(tree->self, tree->write, key, NULL);
    }
    return FALSE;
}

static gboolean load_tree_key(gpointer key, gpointer value, gpointer data) {
    (void) value;
    load_directory_of(data, key);
    return FALSE;
}

// g_settings_apply() and g_settings_backend_write_tree(): one Apply, one commit.
static gboolean settings_bus_backend_write_tree(GSettingsBackend *backend, GTree *tree, gpointer origin_tag) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    TreeWrite write = {self, NULL, NULL, NULL, FALSE};
    if (!bus_ready(self)) return FALSE;
    // The directories first, with their lock lists (as for one write).
    g_tree_foreach(tree, load_tree_key, self);
    g_tree_foreach(tree, check_tree_key, &write);
    if (write.locked || unanswering(self)) return FALSE;
    write.write = pending_write_new();
    write.write->kind = WRITE_APPLY;
    write.sets = g_variant_builder_new(G_VARIANT_TYPE("a{sv}"));
    write.resets = g_variant_builder_new(G_VARIANT_TYPE("as"));
    g_mutex_lock(&self->lock);
    g_tree_foreach(tree, stage_tree_key, &write);
    self->pending++;
    g_mutex_unlock(&self->lock);
    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE("a{sv}"));
    write.write->arguments =
        g_variant_ref_sink(g_variant_new("(a{sv}asa{sv})", write.sets, write.resets, &options));
    g_variant_builder_unref(write.sets);
    g_variant_builder_unref(write.resets);
    g_settings_backend_changed_tree(backend, tree, origin_tag);
    send_write(self, write.write);
    return TRUE;
}

// Notes a write that could not be made (a reset, which has no way to say so): sync reports it.
static void note_unstored(SettingsBusBackend *self) {
    g_mutex_lock(&self->lock);
    self->unstored++;
    g_mutex_unlock(&self->lock);
}

static void settings_bus_backend_reset(GSettingsBackend *backend, const gchar *key, gpointer origin_tag) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    if (!bus_ready(self)) return;
    if (is_locked(self, key)) {
        note_unstored(self);
        return;
    }
    load_directory_of(self, key);
    if (unanswering(self)) {
        note_unstored(self);
        return;
    }
    PendingWrite *write = pending_write_new();
    write->kind = WRITE_RESET;
    write->key = g_strdup(key);
    g_mutex_lock(&self->lock);
    // The broker's Changed brings the value it serves after the reset (an administrator's default), if any.
    stage_locked(self, write, key, NULL);
    self->pending++;
    g_mutex_unlock(&self->lock);
    g_settings_backend_changed(backend, key, origin_tag);
    send_write(self, write);
}

// Whether a directory's read or lock list is still awaiting the broker's answer (one sent unwaited, after a first
// read from the view). Lock held.
static gboolean reads_outstanding_locked(SettingsBusBackend *self) {
    GHashTableIter iter;
    gpointer call;
    g_hash_table_iter_init(&iter, self->calls);
    while (g_hash_table_iter_next(&iter, NULL, &call))
        if (((BrokerCall *) call)->kind != CALL_WAITED) return TRUE;
    return FALSE;
}

// Waits until every write made so far has been answered by the broker, and every directory read sent, up to
// BROKER_WAIT_MS (not at all while it does not answer), so that nothing the broker sends for them comes after: the
// writes have left the app (the connection is flushed), and one left unanswered is undone when its time comes, if
// the app still runs. GLib gives sync no way to report a write that failed:
// g_settings_sync returns nothing, and `gsettings set` and `gsettings reset` would exit 0 after it. So in the
// `gsettings` program alone, whose work ends with that sync, a write the broker refused or left unanswered ends
// the program with status 1 and a line that says so (the broker's refusal itself is logged when it comes).
static void settings_bus_backend_sync(GSettingsBackend *backend) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(backend);
    if (bus_ready(self)) g_dbus_connection_flush_sync(self->bus, NULL, NULL);
    g_mutex_lock(&self->lock);
    gint64 deadline = wait_deadline_locked(self);
    gboolean news = FALSE;
    while (self->pending > 0 || reads_outstanding_locked(self))
        if (!g_cond_wait_until(&self->idle, &self->lock, deadline)) {
            news = mark_unanswering_locked(self);
            break;
        }
    guint unstored = self->unstored, unanswered = self->pending;
    self->unstored = 0;
    g_mutex_unlock(&self->lock);
    if (news) say_unanswering();
    if ((unstored > 0 || unanswered > 0) && g_strcmp0(program_invocation_short_name, "gsettings") == 0) {
        if (unstored > 0)
            g_printerr("settingsbus: the settings broker did not store the value\n");
        else
            g_printerr("settingsbus: the settings broker did not confirm within %d s that it stored the value\n",
                       BROKER_WAIT_MS / 1000);
        exit(1);
    }
}

// MARK: - The object

static gboolean quit_loop(gpointer data) {
    g_main_loop_quit(data);
    return G_SOURCE_REMOVE;
}

static void settings_bus_backend_finalize(GObject *object) {
    SettingsBusBackend *self = SETTINGS_BUS_BACKEND(object);
    settings_bus_backend_sync(G_SETTINGS_BACKEND(self));
    g_mutex_lock(&self->lock);
    if (self->reply_timer) {
        g_source_destroy(self->reply_timer);
        g_clear_pointer(&self->reply_timer, g_source_unref);
    }
    g_mutex_unlock(&self->lock);
    // The module's thread ends first: it has connected the bus by then, and runs nothing of the backend's again.
    g_main_context_invoke(self->context, quit_loop, self->loop);
    g_thread_join(self->signal_thread);
    if (self->filter_target) {
        g_dbus_connection_remove_filter(self->bus, self->filter);
        g_mutex_lock(&self->filter_target->lock);
        self->filter_target->backend = NULL;
        g_mutex_unlock(&self->filter_target->lock);
        filter_target_release(self->filter_target);
    }
    if (self->bus) {
        GHashTableIter iter;
        gpointer directory, watch;
        g_hash_table_iter_init(&iter, self->directories);
        while (g_hash_table_iter_next(&iter, &directory, &watch))
            if (((DirectoryWatch *) watch)->subscription)
                g_dbus_connection_signal_unsubscribe(self->bus, ((DirectoryWatch *) watch)->subscription);
        if (self->description_subscription)
            g_dbus_connection_signal_unsubscribe(self->bus, self->description_subscription);
        call_bus_daemon(self, "RemoveMatch", g_variant_new("(s)", OWNER_RULE), NULL);
        g_object_unref(self->bus);
    }
    g_main_loop_unref(self->loop);
    g_main_context_unref(self->context);
    g_hash_table_unref(self->values);
    g_hash_table_unref(self->administrator);
    g_hash_table_unref(self->confirmed);
    g_hash_table_unref(self->in_flight);
    g_hash_table_unref(self->directories);
    g_hash_table_unref(self->writability);
    // Writes still awaiting an answer when the app let the backend go (sync waited for them no longer).
    GHashTableIter writes;
    gpointer write;
    g_hash_table_iter_init(&writes, self->replies);
    while (g_hash_table_iter_next(&writes, NULL, &write)) pending_write_free(write);
    g_hash_table_unref(self->replies);
    // The reads still awaiting an answer (no thread waits for a call when the backend goes).
    GHashTableIter calls;
    gpointer call;
    g_hash_table_iter_init(&calls, self->calls);
    while (g_hash_table_iter_next(&calls, NULL, &call))
        if (((BrokerCall *) call)->kind != CALL_WAITED) broker_call_free(call);
    g_hash_table_unref(self->calls);
    g_free(self->owner);
    g_free(self->view);
    g_free(self->bus_guid);
    g_free(self->bus_socket);
    g_mutex_clear(&self->lock);
    g_cond_clear(&self->idle);
    G_OBJECT_CLASS(settings_bus_backend_parent_class)->finalize(object);
}

// Sends a call to the bus daemon without waiting; `serial` (NULL: no answer wanted) receives its message serial.
static void call_bus_daemon(SettingsBusBackend *self, const gchar *method, GVariant *arguments, guint32 *serial) {
    GDBusMessage *message = g_dbus_message_new_method_call(BUS_DAEMON, "/org/freedesktop/DBus", BUS_DAEMON, method);
    g_dbus_message_set_body(message, arguments);
    if (!serial) g_dbus_message_set_flags(message, G_DBUS_MESSAGE_FLAGS_NO_REPLY_EXPECTED);
    g_dbus_connection_send_message(self->bus, message, G_DBUS_SEND_MESSAGE_FLAGS_NONE, serial, NULL);
    g_object_unref(message);
}

// What names the app's session bus before it is connected, from its address as GLib finds it
// ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus): the address's GUID, else the identity of its socket file,
// "device:inode" (a `unix:path=` address, as a systemd user bus has). Neither for an address GLib may reach another
// way (several addresses, another transport): the view then waits for the bus's own GUID.
static void find_bus_names(gchar **guid, gchar **socket) {
    const gchar *address = g_getenv("DBUS_SESSION_BUS_ADDRESS");
    const gchar *runtime = g_getenv("XDG_RUNTIME_DIR");
    gchar *path = NULL;
    if (address && address[0]) {
        if (strchr(address, ';') || !g_str_has_prefix(address, "unix:")) return;
        gchar **pairs = g_strsplit(address + strlen("unix:"), ",", -1);
        for (gchar **pair = pairs; *pair; pair++) {
            if (g_str_has_prefix(*pair, "guid=") && !*guid)
                *guid = g_uri_unescape_string(*pair + strlen("guid="), NULL);
            else if (g_str_has_prefix(*pair, "path=") && !path)
                path = g_uri_unescape_string(*pair + strlen("path="), NULL);
        }
        g_strfreev(pairs);
    } else if (runtime && runtime[0] == '/') {
        path = g_build_filename(runtime, "bus", NULL);
    }
    struct stat status;
    if (!*guid && path && path[0] == '/' && stat(path, &status) == 0 && S_ISSOCK(status.st_mode))
        *socket = g_strdup_printf("%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT, (guint64) status.st_dev,
                                  (guint64) status.st_ino);
    g_free(path);
}

// Connects to the session bus, on the module's thread, so that no thread of the app waits for it before its first
// reads (they come from the view). Then it takes the connection's answers and signals (the filter), follows the
// owner of the broker's name, and watches and reads from the broker each directory read meanwhile: a read taken
// from the view is followed by the broker's, which catches any change since; one that waits for the bus
// (wait_connected_locked) is answered by it.
static gboolean connect_in_context(gpointer data) {
    SettingsBusBackend *self = data;
    GError *error = NULL;
    GDBusConnection *bus = g_bus_get_sync(G_BUS_TYPE_SESSION, NULL, &error);
    if (!bus) {
        g_warning("settingsbus: cannot reach the session bus; settings are not stored: %s", error->message);
        g_error_free(error);
        g_mutex_lock(&self->lock);
        self->connecting = FALSE;
        g_cond_broadcast(&self->idle);
        g_mutex_unlock(&self->lock);
        return G_SOURCE_REMOVE;
    }
    // In this thread's context, as every subscription of the module.
    guint descriptions = g_dbus_connection_signal_subscribe(
        bus, SETTINGS_BUS_NAME, SETTINGS_INTERFACE, "DescriptionChanged", SETTINGS_OBJECT_PATH, NULL,
        G_DBUS_SIGNAL_FLAGS_NONE, on_description_changed, self, NULL);
    FilterTarget *target = g_new0(FilterTarget, 1);
    g_mutex_init(&target->lock);
    target->backend = self;
    target->references = 2; // the filter's and the backend's
    guint filter = g_dbus_connection_add_filter(bus, filter_changed, target, filter_target_release);
    g_mutex_lock(&self->lock);
    self->bus = bus;
    self->description_subscription = descriptions;
    self->filter_target = target;
    self->filter = filter;
    // The owner of the broker's name, followed in the order of the bus before any call is sent: the rule for its
    // changes first, then what it is now. Neither waits for an answer: the filter takes GetNameOwner's.
    call_bus_daemon(self, "AddMatch", g_variant_new("(s)", OWNER_RULE), NULL);
    call_bus_daemon(self, "GetNameOwner", g_variant_new("(s)", SETTINGS_BUS_NAME), &self->owner_serial);
    // The directories read meanwhile: each is watched (a match rule: outside the lock), then read from the broker.
    while (TRUE) {
        GPtrArray *unwatched = g_ptr_array_new_with_free_func(g_free);
        GHashTableIter iter;
        gpointer directory, watch;
        g_hash_table_iter_init(&iter, self->directories);
        while (g_hash_table_iter_next(&iter, &directory, &watch))
            if (((DirectoryWatch *) watch)->subscription == 0) g_ptr_array_add(unwatched, g_strdup(directory));
        if (unwatched->len == 0) {
            g_ptr_array_unref(unwatched);
            break;
        }
        g_mutex_unlock(&self->lock);
        guint *subscriptions = g_new0(guint, unwatched->len);
        for (guint index = 0; index < unwatched->len; index++)
            subscriptions[index] = g_dbus_connection_signal_subscribe(
                bus, SETTINGS_BUS_NAME, SETTINGS_INTERFACE, "Changed", SETTINGS_OBJECT_PATH, unwatched->pdata[index],
                G_DBUS_SIGNAL_FLAGS_MATCH_ARG0_PATH, on_changed, self, NULL);
        g_mutex_lock(&self->lock);
        for (guint index = 0; index < unwatched->len; index++) {
            DirectoryWatch *still = g_hash_table_lookup(self->directories, unwatched->pdata[index]);
            if (still && still->subscription == 0) {
                still->subscription = subscriptions[index];
                if (!still->reading && !still->reading_locks) read_watch_locked(self, unwatched->pdata[index], still);
            } else {
                // Let go meanwhile.
                g_dbus_connection_signal_unsubscribe(bus, subscriptions[index]);
            }
        }
        g_free(subscriptions);
        g_ptr_array_unref(unwatched);
    }
    self->connecting = FALSE;
    g_cond_broadcast(&self->idle);
    g_mutex_unlock(&self->lock);
    return G_SOURCE_REMOVE;
}

static void settings_bus_backend_init(SettingsBusBackend *self) {
    g_mutex_init(&self->lock);
    g_cond_init(&self->idle);
    self->values = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_variant_unref);
    self->administrator = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_variant_unref);
    self->confirmed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, confirmed_free);
    self->in_flight = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    self->directories = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, directory_watch_free);
    self->writability = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    self->replies = g_hash_table_new(g_direct_hash, g_direct_equal);
    self->calls = g_hash_table_new(g_direct_hash, g_direct_equal);
    self->context = g_main_context_new();
    self->loop = g_main_loop_new(self->context, FALSE);
    self->view = view_folder();
    find_bus_names(&self->bus_guid, &self->bus_socket);
    self->connecting = TRUE;
    // Run by the module's thread (g_main_context_invoke would run it here, the context not being owned yet), at
    // the priority of the calls invoked there after it.
    GSource *connect = g_idle_source_new();
    g_source_set_priority(connect, G_PRIORITY_DEFAULT);
    g_source_set_callback(connect, connect_in_context, self, NULL);
    g_source_attach(connect, self->context);
    g_source_unref(connect);
    self->signal_thread = g_thread_new("settingsbus-signals", run_signal_thread, self);
}

static void settings_bus_backend_class_init(SettingsBusBackendClass *class) {
    GObjectClass *object_class = G_OBJECT_CLASS(class);
    object_class->finalize = settings_bus_backend_finalize;
    class->read = settings_bus_backend_read;
    class->read_user_value = settings_bus_backend_read_user_value;
    class->write = settings_bus_backend_write;
    class->write_tree = settings_bus_backend_write_tree;
    class->reset = settings_bus_backend_reset;
    class->get_writable = settings_bus_backend_get_writable;
    class->get_permission = settings_bus_backend_get_permission;
    class->subscribe = settings_bus_backend_subscribe;
    class->unsubscribe = settings_bus_backend_unsubscribe;
    class->sync = settings_bus_backend_sync;
}

static void settings_bus_backend_class_finalize(SettingsBusBackendClass *class) {
    (void) class;
}

// MARK: - The GIO module

// Below every backend GLib ships (dconf is 100, the memory and keyfile backends lower): never chosen unless
// GSETTINGS_BACKEND=settingsbus asks for it.
#define SETTINGS_BUS_BACKEND_PRIORITY -200

G_MODULE_EXPORT void g_io_module_load(GIOModule *module) {
    // The type stays registered for the life of the process, as GSettings keeps its backend.
    g_type_module_use(G_TYPE_MODULE(module));
    settings_bus_backend_register_type(G_TYPE_MODULE(module));
    g_io_extension_point_implement(G_SETTINGS_BACKEND_EXTENSION_POINT_NAME, settings_bus_backend_get_type(),
                                   "settingsbus", SETTINGS_BUS_BACKEND_PRIORITY);
}

G_MODULE_EXPORT void g_io_module_unload(GIOModule *module) {
    (void) module;
}

G_MODULE_EXPORT gchar **g_io_module_query(void) {
    return g_strsplit(G_SETTINGS_BACKEND_EXTENSION_POINT_NAME, "!", 0);
}
