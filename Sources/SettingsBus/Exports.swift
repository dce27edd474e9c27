// SPDX-License-Identifier: Apache-2.0

// Keys, errors and paths are part of the client API: importing SettingsBus is enough to use them.
@_exported public import SettingsModel

// The D-Bus types that public signatures of SettingsBus and SettingsModel use, and nothing else of the
// binding: an app that imports only SettingsBus can name each of them (`ImportOnlySettingsBusTests` checks it).

/// Re-exported: a setting's value as it is stored and travels (snapshots, updates, transactions and custom
/// representations are made of it); a type of SettingsBus's own would be a copy of it.
@_exported public import enum DBus.DBusValue
/// Re-exported: the type of a value (``SettingRepresentation/dbusType``, schemas); it is what a signature says.
@_exported public import enum DBus.DBusType
/// Re-exported: an entry of a ``DBusValue/dictionary(key:value:_:)`` value.
@_exported public import struct DBus.DBusDictEntry
/// Re-exported: the payload of a ``DBusValue/objectPath(_:)`` value, which a setting may hold.
@_exported public import struct DBus.ObjectPath
/// Re-exported: the payload of a ``DBusValue/signature(_:)`` value, which a setting may hold.
@_exported public import struct DBus.Signature
/// Re-exported: the broker's bus name (``BusSettingsStore/init(bus:busName:timeout:)``), a validated name that
/// is checked once when it is written.
@_exported public import struct DBus.BusName
