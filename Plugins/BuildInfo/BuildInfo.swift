import Foundation
import PackagePlugin

/// Writes `BuildInfo.swift` for the target it is applied to (BoardControl):
/// the commit the build is made from (`git describe --always --dirty`) and
/// the libgpiod the build compiles against (pkg-config). A prebuild command,
/// so it runs at every build and a commit or an edit is seen; the script
/// rewrites the file only when its text changes, so an unchanged tree
/// recompiles nothing. No network: git and pkg-config read local files.
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "Generated")
        let script = context.package.directoryURL.appending(path: "scripts/build-info.sh")
        return [
            .prebuildCommand(
                displayName: "Build info: git describe, libgpiod",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, context.package.directoryURL.path, output.appending(path: "BuildInfo.swift").path],
                environment: ProcessInfo.processInfo.environment,
                outputFilesDirectory: output)
        ]
    }
}
