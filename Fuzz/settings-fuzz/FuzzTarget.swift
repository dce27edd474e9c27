// SPDX-License-Identifier: Apache-2.0

import FuzzChecks

#if FUZZING
    import Glibc
#endif

/// `settings-fuzz`: built by scripts/fuzz with `-sanitize=fuzzer -DFUZZING`, it is a libFuzzer binary whose
/// check `SETTINGS_FUZZ_CHECK` names; built normally, `settings-fuzz CHECK FILE|FOLDER…` replays inputs.
@main
enum SettingsFuzz {
    static func main() {
        #if FUZZING
            // libFuzzer's own `main` is not linked: the package manager gives the executable this one, so it
            // hands over to libFuzzer's driver with the command line.
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(libFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
            FuzzEntry.replay(arguments: CommandLine.arguments)
        #endif
    }
}

#if FUZZING
    /// The check this run fuzzes, read once before the first input.
    private let check = FuzzEntry.checkFromEnvironment()

    /// Runs one input; libFuzzer calls it from its one thread.
    private func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        FuzzEntry.testOneInput(check, data, size)
    }

    /// `int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t))`, from the
    /// toolchain's libFuzzer runtime that `-sanitize=fuzzer` links.
    @_silgen_name("LLVMFuzzerRunDriver")
    private func libFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32
#endif
