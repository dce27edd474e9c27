// SPDX-License-Identifier: Apache-2.0

import DBus
@testable import SettingsBroker
import SettingsModel
import Testing

/// `Describe` of a secret key never shows its stored value, not even in why it is not served.
struct SecretDescriptionTests {
    @Test(arguments: [false, true])
    func aStoredValueOutOfRangeIsNamedOnlyForAPlainKey(_ secret: Bool) throws {
        let schema = SettingSchema(
            defaultValue: .int32(1), range: SettingRange(min: .int32(0), max: .int32(10)), isSecret: secret)
        let description = KeyDescription(
            key: try SettingPath("/test/describe/pin"), schema: schema, userValue: .int32(4711),
            effectiveValue: .int32(1), lastChange: 3, writable: true)
        let text = GVariantText.format(SchemaCoding.describe(description).body[0])
        #expect(text.contains("value-ignored"), "\(text)")
        #expect(text.contains("4711") == !secret, "\(text)")
    }
}
