// SPDX-License-Identifier: Apache-2.0

import Foundation

/// A picture of an X window as `xwd` writes it (X Window Dump, version 7, `ZPixmap` of 24 or 32 bits a pixel):
/// its size and its pixels as RGB, to compare pictures by their pixels and keep them as PNG files.
struct WindowPicture: Equatable {
    let width: Int
    let height: Int
    /// Red, green and blue, one byte each, row by row.
    let rgb: [UInt8]

    /// Reads an `xwd` file; nil when it is not one of the kind above (every offset checked against its size).
    init?(xwd data: Data) {
        let bytes = [UInt8](data)
        func field(_ index: Int) -> Int? {
            let at = index * 4
            guard at + 4 <= bytes.count else { return nil }
            return bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        guard let headerSize = field(0), field(1) == 7, field(2) == 2, let width = field(4), let height = field(5),
            let byteOrder = field(7), let bitsPerPixel = field(11), let bytesPerLine = field(12),
            let red = field(14), let green = field(15), let blue = field(16), let colors = field(19),
            bitsPerPixel == 32 || bitsPerPixel == 24, width > 0, height > 0, width <= 8192, height <= 8192,
            colors <= 1 << 16
        else { return nil }
        let start = headerSize + colors * 12
        let pixelBytes = bitsPerPixel / 8
        guard bytesPerLine >= width * pixelBytes, start + bytesPerLine * height <= bytes.count else { return nil }
        func channel(_ value: UInt32, _ mask: Int) -> UInt8 {
            guard mask != 0 else { return 0 }
            let shift = UInt32(mask).trailingZeroBitCount
            return UInt8(truncatingIfNeeded: (value & UInt32(mask)) >> shift)
        }
        var rgb = [UInt8]()
        rgb.reserveCapacity(width * height * 3)
        for row in 0..<height {
            for column in 0..<width {
                let at = start + row * bytesPerLine + column * pixelBytes
                var value: UInt32 = 0
                for index in 0..<pixelBytes {
                    let byte = UInt32(bytes[at + index])
                    value |= byteOrder == 0 ? byte << (8 * UInt32(index)) : byte << (8 * UInt32(pixelBytes - 1 - index))
                }
                rgb += [channel(value, red), channel(value, green), channel(value, blue)]
            }
        }
        (self.width, self.height, self.rgb) = (width, height, rgb)
    }

    /// The mean of every channel of every pixel, from 0 (black) to 1 (white).
    var brightness: Double {
        Double(rgb.reduce(0) { $0 + Int($1) }) / Double(max(rgb.count, 1)) / 255
    }

    /// The brightest pixel's brightness (the mean of its channels, 0 to 1) in the columns `columns` and rows `rows`.
    func brightest(columns: Range<Int>, rows: Range<Int>) -> Double {
        var brightest = 0
        for row in rows.clamped(to: 0..<height) {
            for column in columns.clamped(to: 0..<width) {
                let at = (row * width + column) * 3
                brightest = max(brightest, Int(rgb[at]) + Int(rgb[at + 1]) + Int(rgb[at + 2]))
            }
        }
        return Double(brightest) / 3 / 255
    }

    /// How many pixels differ from `other`'s (all of them when the sizes differ).
    func pixelsDiffering(from other: WindowPicture) -> Int {
        guard width == other.width, height == other.height else { return max(width * height, other.width * other.height) }
        var count = 0
        for pixel in 0..<width * height {
            let at = pixel * 3
            if rgb[at] != other.rgb[at] || rgb[at + 1] != other.rgb[at + 1] || rgb[at + 2] != other.rgb[at + 2] {
                count += 1
            }
        }
        return count
    }

    /// The picture as a PNG file (deflate's stored blocks: no compression, nothing to depend on).
    var png: Data {
        var raw = [UInt8]()
        raw.reserveCapacity((width * 3 + 1) * height)
        for row in 0..<height {
            raw.append(0)
            raw += rgb[row * width * 3..<(row + 1) * width * 3]
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65_535, raw.count - offset)
            let last: UInt8 = offset + count == raw.count ? 1 : 0
            zlib += [last, UInt8(count & 0xff), UInt8(count >> 8), UInt8(~count & 0xff), UInt8((~count >> 8) & 0xff)]
            zlib += raw[offset..<offset + count]
            offset += count
        } while offset < raw.count
        var (a, b): (UInt32, UInt32) = (1, 0)
        for byte in raw {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        zlib += Self.bigEndian(b << 16 | a)
        var file: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        file += Self.chunk("IHDR", Self.bigEndian(UInt32(width)) + Self.bigEndian(UInt32(height)) + [8, 2, 0, 0, 0])
        file += Self.chunk("IDAT", zlib)
        file += Self.chunk("IEND", [])
        return Data(file)
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xff), UInt8((value >> 8) & 0xff), UInt8(value & 0xff)]
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        var crc: UInt32 = 0xffff_ffff
        for byte in body {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xedb8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return bigEndian(UInt32(data.count)) + body + bigEndian(~crc)
    }
}
