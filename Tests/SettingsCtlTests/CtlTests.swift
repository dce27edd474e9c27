// SPDX-License-Identifier: Apache-2.0

import Testing

@Suite struct CtlTests {
    @Test func placeholder() {}
}
