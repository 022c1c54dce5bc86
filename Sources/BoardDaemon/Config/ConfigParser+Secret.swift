import BoardSupport
import Yams

extension ConfigParser {
    /// A value that may not be written in the config itself.
    func secret(_ node: Node, _ path: String) -> String? {
        r.error(node, path, "a password is not written in the config; give password_file (a file readable only by boardd's user)")
        return nil
    }
}
