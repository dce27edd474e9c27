// SPDX-License-Identifier: Apache-2.0

import CSandbox
import Foundation
public import SyncProtocol

/// The sync process's own sandbox, which it enters once it has its configuration (decision 0030): with
/// Landlock, it may only read files, and only the system's folders (`/usr`, `/lib`, `/etc`, `/proc`, `/sys`,
/// the folders of the libraries it has loaded), the password file (or `.pgpass`) and the certificate
/// authorities' file; it may write, make or remove nothing; and, where the kernel can restrict the network
/// (Landlock ABI 4), it may connect over TCP only to the database's port (and 53, for name lookups). The
/// store and the rest of the user's home are out of its reach, whatever a flaw in its TLS or PostgreSQL code
/// would make it do. Under systemd its unit adds the same from outside (`settings-sync.service`).
public enum Sandbox {
    /// The folders every process needs to read.
    static let systemFolders = ["/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev/null", "/dev/urandom", "/dev/random"]

    /// Restricts this process for good; returns what it did, for the log: `landlock <ABI>: …`, or why it
    /// could not (`none: …`).
    public static func restrict(for configuration: SyncConfiguration, environment: [String: String]) -> String {
        var paths = systemFolders + loadedLibraryFolders()
        if let file = configuration.passwordFile {
            paths.append(file)
        } else if let file = environment["PGPASSFILE"] ?? environment["HOME"].map({ $0 + "/.pgpass" }) {
            paths.append(file)
        }
        if let file = configuration.database.rootCertificateFile { paths.append(file) }
        if let folder = configuration.database.socketFolder { paths.append(folder) }
        var ports: [UInt16] = []
        if configuration.database.socketFolder == nil { ports = [UInt16(clamping: configuration.database.port), 53] }
        let abi = settingsbus_landlock_abi()
        let pointers = paths.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        let result = pointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { list in
            ports.withUnsafeBufferPointer { portList in
                settingsbus_landlock_restrict(list.baseAddress, Int32(list.count), portList.baseAddress, Int32(portList.count))
            }
        }
        guard result == 0 else {
            if result == -ENOSYS { return "none: the kernel has no Landlock (5.13 or newer, with Landlock enabled)" }
            return "none: Landlock refused the rules (\(String(cString: strerror(-result))))"
        }
        let network = abi >= 4 ? (ports.isEmpty ? "; no TCP" : "; TCP only to ports \(ports.map(String.init).joined(separator: ", "))") : ""
        return "landlock \(abi): files read-only, beneath \(paths.count) paths\(network)"
    }

    /// The folders of the shared libraries this process has loaded (from `/proc/self/maps`): the Swift
    /// runtime's may be outside the system's folders.
    static func loadedLibraryFolders() -> [String] {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return [] }
        var folders: Set<String> = []
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = line[slash...]
            guard path.contains(".so"), let last = path.lastIndex(of: "/") else { continue }
            folders.insert(String(path[..<last]))
        }
        return folders.sorted()
    }
}
