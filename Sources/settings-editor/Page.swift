// SPDX-License-Identifier: Apache-2.0

import Foundation

/// The page and its two files, embedded in the executable (`Page+Files.swift`, written from the files in
/// `Page/` by `scripts/embed-editor-page`): nothing is fetched from anywhere else.
enum Page {
    /// The page, with the CSRF token its writes carry and the directory it opens at.
    static func html(csrf: String, directory: String) -> String {
        htmlTemplate
            .replacingOccurrences(of: "{{csrf}}", with: escaped(csrf))
            .replacingOccurrences(of: "{{directory}}", with: escaped(directory))
    }

    /// Text for an HTML attribute.
    static func escaped(_ text: String) -> String {
        var output = ""
        for character in text {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            default: output.append(character)
            }
        }
        return output
    }
}
