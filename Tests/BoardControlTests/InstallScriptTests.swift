import Foundation
import Testing

/// scripts/install.sh, as scripts/install-test.sh checks it, with the
/// boardd and boardctl this test run built (into temporary DESTDIRs: no
/// users made, no systemctl run).
@Suite struct InstallScriptTests {
    @Test func installsReinstallsAndUninstalls() throws {
        let binDir = URL(fileURLWithPath: BoardctlBinary.path).deletingLastPathComponent().path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [EndToEndTests.root + "/scripts/install-test.sh", binDir]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
        #expect(text.hasSuffix("install-test: every check passed\n"), "\(text)")
        #expect(!text.contains("FAIL"), "\(text)")
    }
}
