// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl load` reads its input as a stream: input that is not a keyfile is refused at its first wrong
/// line, at once and in bounded memory, however much of it follows.
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(3)))
struct LoadInputTests {
    /// Feeds `settingsctl load` (the rest of the arguments) a stream of garbage through a pipe, then waits for it
    /// and prints, as JSON, its status, standard error, the time it took, its peak resident memory (the
    /// `ru_maxrss` of the only child this python process waits for) and how many bytes it took before it
    /// closed the pipe.
    static let feeder = #"""
        import json, os, random, resource, subprocess, sys, tempfile, time
        kind, size, command = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
        if kind == "lines":
            block = b"%\n" * (1 << 19)
        elif kind == "bytes":
            block = random.Random(7).randbytes(1 << 20)
        else:
            block = b"a" * (1 << 20)
        stderr = tempfile.TemporaryFile()
        stdout = tempfile.TemporaryFile()
        start = time.monotonic()
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr)
        written = 0
        try:
            while written < size:
                child.stdin.write(block)
                written += len(block)
            child.stdin.close()
        except BrokenPipeError:
            pass
        status = child.wait()
        seconds = time.monotonic() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        stderr.seek(0)
        stdout.seek(0)
        print(json.dumps({"status": status, "seconds": seconds, "peakKB": peak, "written": written,
                          "stderr": stderr.read().decode("utf-8", "replace"),
                          "stdout": stdout.read().decode("utf-8", "replace")}))
        """#

    struct Outcome: Decodable {
        var status: Int32
        var seconds: Double
        var peakKB: Int
        var written: Int
        var stderr: String
        var stdout: String
    }

    static func feed(_ kind: String, bytes size: Int, on bus: TestBus) async throws -> Outcome {
        let result = try await TestProcess.run(
            "/usr/bin/python3", ["-c", feeder, kind, String(size), try Ctl.path(), "load", "/test/garbage/"],
            environment: bus.environment)
        #expect(result.status == 0, "\(result.stderr)")
        return try JSONDecoder().decode(Outcome.self, from: Data(result.stdout.utf8))
    }

    /// 100 MB of each kind of garbage: short lines that are not a keyfile's, bytes that are not UTF-8, and one
    /// line with no end. Each is refused naming line 1 within 5 s, with a peak resident memory under 64 MB,
    /// without the stream having been read to its end.
    @Test(arguments: ["lines", "bytes", "one-line"])
    func garbageIsRefusedAtItsFirstLineAtOnceInBoundedMemory(kind: String) async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let size = 100 << 20
            let outcome = try await Self.feed(kind, bytes: size, on: bus)
            #expect(outcome.status == 4, "\(outcome.stderr)")
            #expect(outcome.stderr.hasPrefix("Error: line 1: "), "\(outcome.stderr)")
            #expect(outcome.stdout.isEmpty)
            #expect(outcome.seconds < 5, "took \(outcome.seconds) s")
            #expect(outcome.peakKB < 64 << 10, "peak resident memory \(outcome.peakKB) KB")
            #expect(outcome.written < size, "read all \(outcome.written) bytes before refusing line 1")
            #expect(try await Ctl.output(bus, ["tree", "/"]) == "")
            #expect(await broker.stop() == 0)
        }
    }

    /// A valid input read in many chunks: lines cut across reads, `\r\n` endings, a key given twice, a last
    /// line without its newline; and a problem late in the input named by its own line.
    @Test func aLargeInputIsReadAcrossChunksAndItsLinesAreNumbered() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            var lines = ["[/]", "first='once'"]
            for index in 0..<5000 {
                if index % 1000 == 0 { lines.append("[group\(index / 1000)]") }
                lines.append("key\(index)='\(String(repeating: "v", count: index % 97))'")
            }
            lines.append("[/]")
            lines.append("first='twice'")
            let text = lines.joined(separator: "\r\n")
            #expect(try await Ctl.output(bus, ["load", "/test/big/"], input: text) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/big/first"]) == "'twice'\n")
            #expect(try await Ctl.output(bus, ["get", "/test/big/group4/key4999"]) == "'\(String(repeating: "v", count: 4999 % 97))'\n")
            let dump = try await Ctl.output(bus, ["dump", "/test/big/"])
            #expect(dump.split(separator: "\n").count(where: { $0.contains("=") }) == 5001)

            try await Ctl.failure(
                bus, ["load", "/test/big/"], status: 4, message: "line \(lines.count + 1): expected 'name=value'",
                input: text + "\nnot a line\n")
            try await Ctl.failure(
                bus, ["load", "/test/big/"], status: 4, message: "a #schema line \(lines.count + 2): unknown field",
                input: text + "\n#schema first.type=s\n#schema first.colour=red\n")
            #expect(await broker.stop() == 0)
        }
    }
}
