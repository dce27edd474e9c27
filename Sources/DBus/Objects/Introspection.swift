// SPDX-License-Identifier: Apache-2.0

/// Introspection XML (`org.freedesktop.DBus.Introspectable`), generated from what is exported.
enum Introspection {
    static let header = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        """

    /// The standard interfaces every exported object has.
    static let standardInterfaces = """
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="properties" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>

        """

    /// The XML document for an object (nil if no object) with the given child node names.
    static func document(interfaces: [DBusInterface]?, children: [String]) -> String {
        var xml = header + "\n<node>\n"
        if let interfaces {
            xml += standardInterfaces
            for interface in interfaces { xml += interface.introspectionXML(indent: 2) }
        }
        for child in children { xml += "  <node name=\"\(escape(child))\"/>\n" }
        xml += "</node>\n"
        return xml
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}

extension DBusInterface {
    /// The `<interface>` element describing this interface, as introspection shows it.
    ///
    /// - Parameter indent: spaces before the `<interface>` tag; nested elements add two each.
    public func introspectionXML(indent: Int = 0) -> String {
        let pad = String(repeating: " ", count: indent)
        func arg(_ argument: DBusArgument, direction: String?) -> String {
            let name = argument.name.isEmpty ? "" : " name=\"\(Introspection.escape(argument.name))\""
            let dir = direction.map { " direction=\"\($0)\"" } ?? ""
            return "\(pad)    <arg\(name) type=\"\(Introspection.escape(argument.type.signatureText))\"\(dir)/>\n"
        }
        var xml = "\(pad)<interface name=\"\(name)\">\n"
        for method in methods {
            if method.inputs.isEmpty && method.outputs.isEmpty {
                xml += "\(pad)  <method name=\"\(method.name)\"/>\n"
                continue
            }
            xml += "\(pad)  <method name=\"\(method.name)\">\n"
            for input in method.inputs { xml += arg(input, direction: "in") }
            for output in method.outputs { xml += arg(output, direction: "out") }
            xml += "\(pad)  </method>\n"
        }
        for signal in signals {
            if signal.arguments.isEmpty {
                xml += "\(pad)  <signal name=\"\(signal.name)\"/>\n"
                continue
            }
            xml += "\(pad)  <signal name=\"\(signal.name)\">\n"
            for argument in signal.arguments { xml += arg(argument, direction: nil) }
            xml += "\(pad)  </signal>\n"
        }
        for property in properties {
            let open = "\(pad)  <property name=\"\(property.name)\" type=\"\(Introspection.escape(property.type.signatureText))\" access=\"\(property.access)\""
            if property.changeSignal == .emitsValue {
                xml += open + "/>\n"
            } else {
                xml += open + ">\n"
                xml += "\(pad)    <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(property.changeSignal.rawValue)\"/>\n"
                xml += "\(pad)  </property>\n"
            }
        }
        xml += "\(pad)</interface>\n"
        return xml
    }
}
