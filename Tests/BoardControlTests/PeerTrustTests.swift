import BoardControl
import Foundation
import Glibc
import Testing

/// boardctl believes only a boardd it can trust: the process answering on
/// the socket runs as root, as the user running boardctl, or as the owner
/// of the socket's directory. Another user's socket in /tmp (anyone may
/// make one there) is refused before anything is sent.
@Suite struct PeerTrustTests {
    @Test func theRuleNamesRootTheUserAndTheDirectorysOwner() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        #expect(chown(dir, 4242, 4242) == 0 || getuid() != 0)
        let me: UInt32 = 1000
        #expect(ControlClient.trusts(uid: 0, path: "/tmp/boardd-1000.sock", me: me))
        #expect(ControlClient.trusts(uid: me, path: "/tmp/boardd-1000.sock", me: me))
        #expect(!ControlClient.trusts(uid: 4242, path: "/tmp/boardd-1000.sock", me: me), "/tmp is root's: another user there is a squatter")
        if getuid() == 0 {
            #expect(ControlClient.trusts(uid: 4242, path: dir + "/boardd.sock", me: me), "the directory's owner (/run/boardd: the service's user)")
            #expect(!ControlClient.trusts(uid: 4243, path: dir + "/boardd.sock", me: me))
        }
    }

    /// A process of another user listens where boardctl looks and answers
    /// like boardd: `set valve off` is refused (exit 7) and never sent.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "runs only as root with setpriv"))
    func aSquattersSocketIsNotTrusted() throws {
        let dir = try TempDir.make()
        defer { TempDir.remove(dir) }
        #expect(chmod(dir, 0o1777) == 0, "a directory like /tmp: root's, anyone may make a socket in it")
        let path = dir + "/boardd-0.sock"
        let log = dir + "/received"
        let squatter = Process()
        squatter.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        squatter.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
            """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(4)
            print("ready", flush=True)
            while True:
                c, _ = s.accept(); d = c.recv(65536)
                if d: open(sys.argv[2], "ab").write(d)
                c.sendall(b'{"v":1,"id":1,"ok":true,"line":"valve","value":false}\\n'); c.close()
            """, path, log,
        ]
        #expect(chmod(dir, 0o1777) == 0)
        let out = Pipe()
        squatter.standardOutput = out
        try squatter.run()
        defer {
            squatter.terminate()
            squatter.waitUntilExit()
        }
        let ready = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        try #require(ready.contains("ready"), "the squatter did not start: \(ready)")
        let r = try BoardctlBinary.run(["set", "valve", "off", "--socket", path])
        #expect(r.status == 7, "\(r)")
        #expect(r.stderr.hasPrefix("boardctl: the process answering on \(path) (pid \(squatter.processIdentifier)) runs as uid 65534"), "\(r.stderr)")
        #expect(r.stderr.contains("it is not trusted to be boardd, and nothing was sent"), "\(r.stderr)")
        #expect(!r.stdout.contains("valve"), "no answer printed: \(r.stdout)")
        #expect(!FileManager.default.fileExists(atPath: log), "nothing was sent to it")
    }
}
