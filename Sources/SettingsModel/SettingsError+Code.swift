// SPDX-License-Identifier: Apache-2.0

extension SettingsError {
    /// A kind of settings bus failure.
    ///
    /// Codes are static members of an opaque struct, so new codes can be added without breaking clients that
    /// switch over them with a `default` case. Each code has exactly one D-Bus error name, listed in one table
    /// (``dbusErrorName``):
    ///
    /// | code | D-Bus error name |
    /// | --- | --- |
    /// | ``invalidKey`` | `io.github.settingsbus.Settings1.Error.InvalidKey` |
    /// | ``unknownKey`` | `io.github.settingsbus.Settings1.Error.UnknownKey` |
    /// | ``typeMismatch`` | `io.github.settingsbus.Settings1.Error.TypeMismatch` |
    /// | ``outOfRange`` | `io.github.settingsbus.Settings1.Error.OutOfRange` |
    /// | ``notWritable`` | `io.github.settingsbus.Settings1.Error.NotWritable` |
    /// | ``schemaConflict`` | `io.github.settingsbus.Settings1.Error.SchemaConflict` |
    /// | ``conflict`` | `io.github.settingsbus.Settings1.Error.Conflict` |
    /// | ``invalidValue`` | `io.github.settingsbus.Settings1.Error.InvalidValue` |
    /// | ``tooLarge`` | `io.github.settingsbus.Settings1.Error.TooLarge` |
    /// | ``storeFailure`` | `io.github.settingsbus.Settings1.Error.StoreFailure` |
    /// | ``accessDenied`` | `io.github.settingsbus.Settings1.Error.AccessDenied` |
    /// | ``brokerUnavailable`` | `org.freedesktop.DBus.Error.ServiceUnknown` |
    /// | ``timedOut`` | `org.freedesktop.DBus.Error.NoReply` |
    /// | ``disconnected`` | `org.freedesktop.DBus.Error.Disconnected` |
    ///
    /// The last three are raised on the client side, from the bus's own errors; the broker never sends them.
    public struct Code: Sendable, Hashable {
        private enum Base: String, CaseIterable {
            case invalidKey = "InvalidKey"
            case unknownKey = "UnknownKey"
            case typeMismatch = "TypeMismatch"
            case outOfRange = "OutOfRange"
            case notWritable = "NotWritable"
            case schemaConflict = "SchemaConflict"
            case conflict = "Conflict"
            case invalidValue = "InvalidValue"
            case tooLarge = "TooLarge"
            case storeFailure = "StoreFailure"
            case accessDenied = "AccessDenied"
            case brokerUnavailable = "org.freedesktop.DBus.Error.ServiceUnknown"
            case timedOut = "org.freedesktop.DBus.Error.NoReply"
            case disconnected = "org.freedesktop.DBus.Error.Disconnected"

            /// The one table from codes to D-Bus error names.
            var dbusErrorName: String {
                rawValue.contains(".") ? rawValue : SettingsBusNames.errorPrefix + rawValue
            }
        }

        private let base: Base

        private init(_ base: Base) { self.base = base }

        /// A key or directory breaks the path grammar (see ``SettingPath``).
        public static let invalidKey = Code(.invalidKey)
        /// The key has neither a user value nor a registered default.
        public static let unknownKey = Code(.unknownKey)
        /// A value's type differs from the type registered for the key.
        public static let typeMismatch = Code(.typeMismatch)
        /// A value lies outside the range, or is not one of the choices, registered for the key.
        public static let outOfRange = Code(.outOfRange)
        /// The key may not be written: an administrator locked it (the message names the lock's file and line),
        /// or it is a debug key in a release build.
        public static let notWritable = Code(.notWritable)
        /// The key is already registered with a different schema.
        public static let schemaConflict = Code(.schemaConflict)
        /// A compare-and-set failed: a touched key changed after the given serial.
        public static let conflict = Code(.conflict)
        /// A value, its GVariant text, or a schema is malformed.
        public static let invalidValue = Code(.invalidValue)
        /// A value is larger or nested deeper than the settings bus allows.
        public static let tooLarge = Code(.tooLarge)
        /// The broker could not read or write its persistent store.
        public static let storeFailure = Code(.storeFailure)
        /// The key is secret and the caller is not one of the users the broker gives secret values to.
        public static let accessDenied = Code(.accessDenied)
        /// No broker owns the bus name and none could be activated.
        public static let brokerUnavailable = Code(.brokerUnavailable)
        /// The broker did not answer in time.
        public static let timedOut = Code(.timedOut)
        /// The connection to the bus is closed or was lost.
        public static let disconnected = Code(.disconnected)

        /// Every code, in the order of the table above.
        public static let allCases: [Code] = Base.allCases.map(Code.init)

        /// The D-Bus error name of the code, such as `io.github.settingsbus.Settings1.Error.OutOfRange`.
        public var dbusErrorName: String { base.dbusErrorName }

        /// The short name of the code, such as `OutOfRange` (the last element of ``dbusErrorName``).
        public var name: String {
            String(dbusErrorName.split(separator: ".").last ?? Substring(dbusErrorName))
        }

        /// Finds the code of a D-Bus error name.
        ///
        /// - Parameter dbusErrorName: A name such as `io.github.settingsbus.Settings1.Error.UnknownKey`.
        /// - Returns: `nil` when the name is not in the table.
        public init?(dbusErrorName: String) {
            guard let base = Base.allCases.first(where: { $0.dbusErrorName == dbusErrorName }) else { return nil }
            self.base = base
        }
    }
}

// MARK: - CustomStringConvertible

extension SettingsError.Code: CustomStringConvertible {
    /// The short name of the code, such as `OutOfRange`.
    public var description: String { name }
}
