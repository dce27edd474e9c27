// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl dump` and `load`: the keyfile format of `dconf dump`, loaded in one atomic commit.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct DumpLoadTests {
    /// Values of many types, as `settingsctl set` takes them.
    static let values: [(String, String)] = [
        ("/test/dl/s", #""it's \"quoted\" é ✓""#),
        ("/test/dl/i", "5"),
        ("/test/dl/x", "int64 -5"),
        ("/test/dl/t", "uint64 18446744073709551615"),
        ("/test/dl/u", "uint32 7"),
        ("/test/dl/n", "int16 -3"),
        ("/test/dl/q", "uint16 3"),
        ("/test/dl/y", "byte 0x41"),
        ("/test/dl/d", "0.5"),
        ("/test/dl/b", "true"),
        ("/test/dl/empty", "@as []"),
        ("/test/dl/nested", "[['a'], @as []]"),
        ("/test/dl/dict", "{'k': <1>, 'j': <'v'>}"),
        ("/test/dl/tuple", "(1, 'x', true, [2.5])"),
        ("/test/dl/variant", "<<int64 3>>"),
        ("/test/dl/bytes", "b'hi\\n'"),
        ("/test/dl/path", "objectpath '/a/b'"),
        ("/test/dl/sub/deep", "'deep'"),
        ("/test/dl/sub.dir/k", "1"),
    ]

    static let expectedDump = """
        [/]
        b=true
        bytes=b'hi\\n'
        d=0.5
        dict={'k': <1>, 'j': <'v'>}
        empty=@as []
        i=5
        n=int16 -3
        nested=[['a'], []]
        path=objectpath '/a/b'
        q=uint16 3
        s="it's \\"quoted\\" é ✓"
        t=uint64 18446744073709551615
        tuple=(1, 'x', true, [2.5])
        u=uint32 7
        variant=<<int64 3>>
        x=int64 -5
        y=byte 0x41

        [sub.dir]
        k=1

        [sub]
        deep='deep'

        """

    @Test func dumpLoadDumpIsIdentical() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            for (key, text) in Self.values {
                _ = try await Ctl.output(bus, ["set", key, text])
            }
            let dump = try await Ctl.output(bus, ["dump", "/test/dl/"])
            #expect(dump == Self.expectedDump)

            // Reset everything, load the dump back, and dump again.
            _ = try await Ctl.output(bus, ["reset", "-r", "/test/"])
            #expect(try await Ctl.output(bus, ["dump", "/"]) == "")
            #expect(try await Ctl.output(bus, ["load", "/test/dl/"], input: dump) == "")
            #expect(try await Ctl.output(bus, ["dump", "/test/dl/"]) == dump)

            // Loaded under another directory, the same dump makes the same tree there.
            #expect(try await Ctl.output(bus, ["load", "/test/copy/"], input: dump) == "")
            #expect(try await Ctl.output(bus, ["dump", "/test/copy/"]) == dump)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func loadIsOneCommitAndReplaceResetsWhatTheInputLacks() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["load", "/test/replace/"], input: "[/]\na=1\nb=2\n\n[sub]\nc=3\n")
            #expect(try await Self.serial(bus) == 1)
            _ = try await Ctl.output(bus, ["set", "/test/outside", "'kept'"])

            _ = try await Ctl.output(bus, ["load", "--replace", "/test/replace/"], input: "[/]\nb=20\n")
            #expect(try await Self.serial(bus) == 3)
            #expect(try await Ctl.output(bus, ["tree", "/test/"]) == "/test/outside 'kept'\n/test/replace/b 20\n")

            // A file, and a load that would reset everything: still one commit.
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-\(getpid()).ini")
            try "# comment\n[other]\nd='x'\n".write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            _ = try await Ctl.output(bus, ["load", "--replace", "--file", file.path, "/test/replace/"])
            #expect(try await Self.serial(bus) == 4)
            #expect(try await Ctl.output(bus, ["dump", "/test/replace/"]) == "[other]\nd='x'\n")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aRefusedValueLoadsNothing() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["register", "-"], input: "[/test/atomic/]\nsize.type=u\nsize.default=1\n")
            try await Ctl.failure(
                bus, ["load", "/test/atomic/"], status: 4, message: "/test/atomic/size",
                input: "[/]\nfirst='a'\nsize='large'\nlast='z'\n")
            #expect(try await Ctl.output(bus, ["tree", "/test/atomic/"]) == "/test/atomic/size uint32 1\n")
            #expect(await broker.stop() == 0)
        }
    }

    /// The store's serial, from `tree --json`.
    static func serial(_ bus: TestBus) async throws -> Int? {
        let json = try await Ctl.output(bus, ["tree", "--json", "/"])
        guard let range = json.range(of: #""serial":[0-9]+"#, options: .regularExpression) else { return nil }
        return Int(json[range].dropFirst(9))
    }
}
