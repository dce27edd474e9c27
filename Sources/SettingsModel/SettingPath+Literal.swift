// SPDX-License-Identifier: Apache-2.0

// MARK: - ExpressibleByStringLiteral

extension SettingPath: ExpressibleByStringLiteral {
    /// Makes a key from a literal such as `"/org/example/editor/theme"`.
    ///
    /// A literal that breaks the key grammar is a programmer error and traps, naming the rule it breaks; use
    /// ``init(_:)`` for text that comes from outside the program.
    public init(stringLiteral value: StaticString) {
        do {
            try self.init(value.description)
        } catch {
            preconditionFailure(error.message)
        }
    }
}

extension SettingDirectory: ExpressibleByStringLiteral {
    /// Makes a directory from a literal such as `"/org/example/editor/"`.
    ///
    /// A literal that breaks the directory grammar is a programmer error and traps; use ``init(_:)`` for text
    /// that comes from outside the program.
    public init(stringLiteral value: StaticString) {
        do {
            try self.init(value.description)
        } catch {
            preconditionFailure(error.message)
        }
    }
}
