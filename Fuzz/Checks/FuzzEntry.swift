// SPDX-License-Identifier: Apache-2.0

#if canImport(Glibc)
    import Glibc
#endif

/// What the fuzz executables call: libFuzzer's entry point, and a replay of files for builds without
/// libFuzzer.
public enum FuzzEntry {
    /// Runs one input from libFuzzer; a broken promise ends the process, so that libFuzzer saves the input.
    ///
    /// - Returns: 0, as libFuzzer requires.
    public static func testOneInput(_ check: FuzzCheck, _ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
            try check.run(bytes)
        } catch {
            fatalError("fuzz check \(check.rawValue) failed: \(error.description)")
        }
        return 0
    }

    /// The check named by the `SETTINGS_FUZZ_CHECK` environment variable; ends the process when it names none.
    public static func checkFromEnvironment() -> FuzzCheck {
        let name = getenv("SETTINGS_FUZZ_CHECK").map { String(cString: $0) } ?? ""
        guard let check = FuzzCheck(rawValue: name) else {
            print("settings-fuzz: set SETTINGS_FUZZ_CHECK to one of \(checkNames) (it is '\(name)')")
            exit(2)
        }
        return check
    }

    private static var checkNames: String { FuzzCheck.allCases.map(\.rawValue).joined(separator: ", ") }

    /// `settings-fuzz CHECK FILE|FOLDER…`: runs every file named (or found in a folder named) through the check
    /// and exits with 1 when one fails; how an input that libFuzzer saved is looked at in a normal build.
    public static func replay(arguments: [String]) -> Never {
        guard arguments.count >= 3, let check = FuzzCheck(rawValue: arguments[1]) else {
            print("usage: settings-fuzz CHECK FILE|FOLDER…   (CHECK is one of \(checkNames))")
            print("Runs each input through the check. scripts/fuzz builds this with libFuzzer and fuzzes.")
            exit(2)
        }
        let paths = arguments.dropFirst(2)
        var failures = 0
        var count = 0
        var accepted = 0
        for path in paths {
            for file in FuzzInputs.files(at: path) {
                count += 1
                do {
                    if try check.run(FuzzInputs.read(file)) == .accepted { accepted += 1 }
                } catch {
                    failures += 1
                    print("\(file): \(error.description)")
                }
            }
        }
        print("\(count) inputs: \(accepted) accepted, \(count - accepted - failures) refused, \(failures) failed")
        exit(failures == 0 ? 0 : 1)
    }
}

/// Reads fuzz inputs from files and folders.
public enum FuzzInputs {
    /// The file itself, or every regular file in the folder (not recursively), sorted by name.
    public static func files(at path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if entry.pointee.d_type == UInt8(DT_REG) { names.append(name) }
        }
        return names.sorted().map { path + "/" + $0 }
    }

    /// The bytes of a file.
    public static func read(_ path: String) -> [UInt8] {
        guard let file = fopen(path, "rb") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }
}
