// swift-tools-version: 6.2
// SPDX-License-Identifier: Apache-2.0

import PackageDescription

/// Upcoming language features applied to every target (see STYLE §6).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

/// The broker's release build keeps the memory an idle broker holds small (decision 0030): each function in
/// a section of its own, the functions it runs from its start to an idle wait placed first in its text
/// (`Sources/settings-broker/hot-functions.order`, written by `scripts/order-broker-functions`), so that the
/// pages it keeps resident hold code it runs; its relocations packed (DT_RELR, glibc 2.36) and no symbol
/// exported, so that neither is read at start; the C++ standard library linked in rather than loaded
/// (`scripts/ld-broker`, which runs lld). For the broker's own targets only, which no library product
/// holds, so an app that depends on the package never sees these flags.
let brokerReleaseCompile: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-function-sections"], .when(platforms: [.linux], configuration: .release))
]
/// GIO's headers and libraries (Debian's `libglib2.0-dev`), for the C targets that use them: what
/// `pkg-config gio-2.0` gives, without its `-pthread`, which SwiftPM refuses with a warning on every build.
/// `glibconfig.h` is in the machine's multiarch folder.
#if arch(arm64)
let multiarch = "aarch64-linux-gnu"
#else
let multiarch = "x86_64-linux-gnu"
#endif
let gioCompile: [CSetting] = [
    .unsafeFlags(["-I/usr/include/glib-2.0", "-I/usr/lib/\(multiarch)/glib-2.0/include"])
]
let gioLink: [LinkerSetting] = [.linkedLibrary("gio-2.0"), .linkedLibrary("gobject-2.0"), .linkedLibrary("glib-2.0")]

let brokerReleaseLink: [LinkerSetting] = [
    .unsafeFlags(
        [
            "-ld-path=\(Context.packageDirectory)/scripts/ld-broker", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
            "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/settings-broker/hot-functions.order",
            "-Xlinker", "--no-warn-symbol-ordering",
        ], .when(platforms: [.linux], configuration: .release))
]

/// Packages only the tools use are resolved only with the trait `Tools` (a dependent resolves
/// every package a dependency declares, unless each use of it is conditioned on a trait that is off).
let tools: TargetDependencyCondition? = .when(traits: ["Tools"])

/// swift-configuration is resolved only with the trait `Configuration`, for the same reason.
let configuration: TargetDependencyCondition? = .when(traits: ["Configuration"])

let package = Package(
    name: "SettingsBus",
    products: [
        .library(name: "DBus", targets: ["DBus"]),
        .library(name: "SettingsModel", targets: ["SettingsModel"]),
        .library(name: "SettingsBus", targets: ["SettingsBus"]),
        .library(name: "SettingsBusConfiguration", targets: ["SettingsBusConfiguration"]),
        .library(name: "SettingsBusTesting", targets: ["SettingsBusTesting"]),
        // The GSettings backend `settingsbus`, a GIO module in C (libsettingsbus-gio.so): GIO loads it into
        // GSettings apps with GSETTINGS_BACKEND=settingsbus.
        .library(name: "settingsbus-gio", type: .dynamic, targets: ["CGSettingsBackend"]),
        .executable(name: "settings-broker", targets: ["settings-broker"]),
        .executable(name: "settings-sync", targets: ["settings-sync"]),
        .executable(name: "settings-bench", targets: ["settings-bench"]),
        .executable(name: "settingsctl", targets: ["settingsctl"]),
        .executable(name: "settings-editor", targets: ["settings-editor"]),
    ],
    traits: [
        .trait(
            name: "Tools",
            description: """
                The broker, its sync process, settingsctl, the benchmark and the tests, with the packages only \
                they use (swift-argument-parser, swift-log, swift-collections, and \
                postgres-nio for the sync process alone). On by default; an \
                app that depends on the SettingsBus library writes `traits: []` and resolves none of them.
                """),
        .trait(
            name: "Configuration",
            description: """
                The SettingsBusConfiguration library: a swift-configuration provider over a directory of the \
                settings bus, with swift-configuration (none of its own traits). On by default; an app that uses \
                it writes `traits: ["Configuration"]`.
                """),
        .default(enabledTraits: ["Tools", "Configuration"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: []),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "DBus",
            dependencies: ["CDBus"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SettingsModel",
            dependencies: ["DBus"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "CSandbox",
            path: "Sources/CSandbox"
        ),
        .target(
            name: "CGSettingsBackend",
            cSettings: gioCompile,
            // GIO loads the module into every GSettings app, so it needs no Swift runtime: without swiftc's
            // start-up object, and linked by scripts/ld-as-needed, which drops the libswiftCore swiftc names.
            linkerSettings: gioLink + [
                .unsafeFlags(["-nostartfiles", "-ld-path=\(Context.packageDirectory)/scripts/ld-as-needed"])
            ]
        ),
        .target(
            name: "SyncProtocol",
            dependencies: [
                "DBus",
                "SettingsModel",
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SettingsBroker",
            dependencies: [
                "CSandbox",
                "CSQLite",
                "DBus",
                "SettingsModel",
                "SyncProtocol",
                .product(name: "OrderedCollections", package: "swift-collections", condition: tools),
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            swiftSettings: swiftSettings + brokerReleaseCompile
        ),
        .target(
            name: "SettingsSync",
            dependencies: [
                "CSandbox",
                "DBus",
                "SettingsModel",
                "SyncProtocol",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: tools),
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SettingsBus",
            dependencies: ["DBus", "SettingsModel"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SettingsBusConfiguration",
            dependencies: [
                "DBus",
                "SettingsBus",
                .product(name: "Configuration", package: "swift-configuration", condition: configuration),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "settings-broker",
            dependencies: [
                "CSandbox",
                "SettingsBroker",
                "SyncProtocol",
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            exclude: ["hot-functions.order"],
            swiftSettings: swiftSettings + brokerReleaseCompile,
            linkerSettings: brokerReleaseLink
        ),
        .executableTarget(
            name: "settings-sync",
            dependencies: [
                "CSandbox",
                "DBus",
                "SettingsModel",
                "SettingsSync",
                "SyncProtocol",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: tools),
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "settings-bench",
            dependencies: [
                "DBus",
                "SettingsModel",
                "SettingsBus",
                "SettingsBusTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: tools),
            ],
            swiftSettings: swiftSettings
        ),
        // A GSettings app in C that settings-bench starts to measure the GIO module against dconf's
        // (Sources/settings-bench/Bench+GSettings.swift).
        .executableTarget(
            name: "gsettings-probe",
            cSettings: gioCompile,
            linkerSettings: gioLink
        ),
        .executableTarget(
            name: "settingsctl",
            dependencies: [
                "DBus",
                "SettingsModel",
                "SettingsBus",
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: tools),
            ],
            swiftSettings: swiftSettings
        ),
        // The settings editor: a page for a browser on 127.0.0.1, served by an executable of its own so that
        // neither the broker nor settingsctl grows (docs/editor.md).
        .executableTarget(
            name: "settings-editor",
            dependencies: [
                "DBus",
                "SettingsModel",
                "SettingsBus",
                .product(name: "Hummingbird", package: "hummingbird", condition: tools),
                .product(name: "NIOCore", package: "swift-nio", condition: tools),
                .product(name: "HTTPTypes", package: "swift-http-types", condition: tools),
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: tools),
                .product(name: "Logging", package: "swift-log", condition: tools),
            ],
            exclude: ["Page"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SettingsBusTesting",
            dependencies: ["DBus", "SettingsModel", "SettingsBus"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ThemeSettings",
            dependencies: ["SettingsBus", "SettingsModel"],
            path: "examples/theme/ThemeSettings",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "switch-theme",
            dependencies: ["SettingsBus", "ThemeSettings"],
            path: "examples/theme/switch-theme",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "follow-theme",
            dependencies: ["SettingsBus", "ThemeSettings"],
            path: "examples/theme/follow-theme",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "notes-v1",
            dependencies: ["SettingsBus"],
            path: "examples/notes/notes-v1",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "notes-v2",
            dependencies: ["SettingsBus"],
            path: "examples/notes/notes-v2",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "launch-counter",
            dependencies: ["SettingsBus", "SettingsModel"],
            path: "examples/launch-counter",
            exclude: ["README.md"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "FuzzChecks",
            dependencies: ["DBus", "SettingsModel"],
            path: "Fuzz/Checks",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "settings-fuzz",
            dependencies: ["FuzzChecks"],
            path: "Fuzz/settings-fuzz",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "settingsbus-load-client",
            dependencies: ["SettingsBus", "DBus"],
            path: "Tests/LoadClient",
            swiftSettings: swiftSettings
        ),
        // The test bundle's share of the machine: how many suites run at once (Tests/TestMachine).
        .target(
            name: "TestMachine",
            path: "Tests/TestMachine",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SettingsBusTests",
            dependencies: ["TestMachine", "SettingsBus", "SettingsModel", "DBus", "SettingsBusTesting", "ThemeSettings"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SettingsBusConfigurationTests",
            dependencies: [
                "TestMachine",
                "SettingsBusConfiguration",
                "SettingsBus",
                "DBus",
                "SettingsBusTesting",
                .product(name: "Configuration", package: "swift-configuration", condition: configuration),
                .product(name: "ConfigurationTesting", package: "swift-configuration", condition: configuration),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "DBusTests",
            dependencies: ["TestMachine", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SettingsModelTests",
            dependencies: ["TestMachine", "SettingsModel", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SettingsCtlTests",
            dependencies: ["TestMachine", "SettingsBus", "SettingsModel", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GSettingsBackendTests",
            dependencies: ["TestMachine", "SettingsBus", "SettingsModel", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SettingsBrokerTests",
            dependencies: ["TestMachine", "SettingsBroker", "SettingsModel", "SyncProtocol", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SyncTests",
            dependencies: ["TestMachine", "SettingsBus", "SettingsModel", "SettingsSync", "SyncProtocol", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FuzzTests",
            dependencies: ["TestMachine", "FuzzChecks", "DBus", "SettingsModel"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ReliabilityTests",
            dependencies: ["TestMachine", "SettingsBroker", "SettingsModel", "DBus", "SettingsBusTesting"],
            swiftSettings: swiftSettings
        ),
    ]
)
