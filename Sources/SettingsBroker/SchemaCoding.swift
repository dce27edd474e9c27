// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// Writes a ``KeyDescription`` as the `Describe` reply (``SettingsModel/Settings1/DescribeReply``).
///
/// The arguments of `Register` are read by ``SettingsModel/Settings1/RegisterRequest``.
enum SchemaCoding {
    static func describe(_ description: KeyDescription) -> Settings1.DescribeReply {
        let schema = description.schema
        var reply = Settings1.DescribeReply(
            writable: description.writable, schema: schema,
            signature: schema?.type ?? description.userValue?.type, serial: description.lastChange)
        if let user = description.userValue, schema?.isSecret != true {
            reply.value = user
        }
        if let schema, let user = description.userValue, let reason = schema.whyNotServed(user) {
            // The reason names the stored value, which a secret key's description never shows.
            reply.valueIgnored =
                schema.isSecret
                ? "the stored value is not served under the registered schema: Get returns the default until it "
                    + "is set again" : reason
        }
        reply.locked = description.lock.map { "\($0.file), line \($0.line)" }
        if schema?.isSecret != true { reply.administratorDefault = description.administratorDefault }
        reply.source = description.source.rawValue
        return reply
    }
}
