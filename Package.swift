// swift-tools-version: 6.2
//
// boardloop: Core Foundation's run loop semantics on epoll/eventfd/timerfd/signalfd,
// with libgpiod line events as port sources, for Linux single-board computers.
//
// Layers (lower never imports higher), see README.md ("Layers"):
//   1. C shims      CLinux (epoll/eventfd/timerfd/signalfd/futex), CGPIOD (libgpiod 1.6 / 2.x),
//                   CMosquitto (libmosquitto, loaded for the daemon's MQTT client),
//                   Clibyaml (libyaml, the config reader's parser)
//   2. Engine       Boardloop             (Glibc only, never Foundation)
//   3. GPIO         BoardloopGPIO, BoardloopGPIOMock
//   4. Board        BoardSupport
//   5. Daemon lib   BoardDaemon; BoardControl (the control socket's client side)
//   6. Executables  boardd, boardctl
import PackageDescription

#if canImport(Glibc)
    import Glibc
#endif

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("StrictConcurrency"),
]

// boardd's release link: packed relative relocations (DT_RELR). A static-stdlib
// boardd is a position-independent executable with ~78,000 relative
// relocations; as classic RELA entries their table is 1.8 MiB that the dynamic
// loader reads page by page at every start, and it stays resident. Packed they
// are 15 KiB. DT_RELR needs glibc 2.36 (Debian 12, Raspberry Pi OS bookworm) at
// run time and a linker that writes it: the toolchain's lld (the default gold
// cannot). Older glibc builds keep the classic table.
let releaseLink: [LinkerSetting] = {
    #if canImport(Glibc)
        var text = [CChar](repeating: 0, count: 64)  // "glibc 2.36"
        _ = confstr(Int32(_CS_GNU_LIBC_VERSION), &text, text.count)
        let name = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let version = name.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
        if version.count >= 2, (version[0], version[1]) >= (2, 36) {
            return [
                .unsafeFlags(
                    ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                    .when(platforms: [.linux], configuration: .release))
            ]
        }
    #endif
    return []
}()

let package = Package(
    name: "boardloop",
    products: [
        .library(name: "Boardloop", targets: ["Boardloop"]),
        .library(name: "BoardloopGPIO", targets: ["BoardloopGPIO"]),
        .library(name: "BoardloopGPIOMock", targets: ["BoardloopGPIOMock"]),
        .library(name: "BoardloopTestSupport", targets: ["BoardloopTestSupport"]),
        // The daemon as a library: boardd and its benchmarks (Benchmarks/) link it.
        .library(name: "BoardDaemon", targets: ["BoardDaemon"]),
        .executable(name: "loop-demo", targets: ["loop-demo"]),
        .executable(name: "gpio-button-led", targets: ["gpio-button-led"]),
        .executable(name: "gpio-sim-guest", targets: ["gpio-sim-guest"]),
        .executable(name: "worker-demo", targets: ["worker-demo"]),
        .executable(name: "boardd", targets: ["boardd"]),
        .executable(name: "boardctl", targets: ["boardctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // Layer 1: C shims.
        .target(name: "CLinux"),
        .target(
            name: "CGPIOD",
            dependencies: ["Clibgpiod"],
            exclude: ["check-v2"]
        ),
        // libgpiod itself: flags from pkg-config (libgpiod.pc).
        .systemLibrary(name: "Clibgpiod", pkgConfig: "libgpiod", providers: [.apt(["libgpiod-dev"])]),
        // libmosquitto: boardd's MQTT client (the `mqtt:` block), its
        // socket a port source on the main loop. CMosquitto loads it with
        // dlopen when a config has an mqtt: block (its header from
        // libmosquitto-dev); the tests' own MQTT client links it
        // (Clibmosquitto, flags from pkg-config).
        .target(name: "CMosquitto", linkerSettings: [.linkedLibrary("dl")]),
        .systemLibrary(name: "Clibmosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // libyaml: the config reader's YAML parser (its event API; the
        // daemon composes the nodes itself, BoardSupport/YAML).
        .systemLibrary(name: "Clibyaml", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),

        // Layer 2: the engine.
        .target(name: "Boardloop", dependencies: ["CLinux"], swiftSettings: strict),

        // Layer 3: GPIO.
        .target(name: "BoardloopGPIO", dependencies: ["Boardloop", "CGPIOD", "CLinux"], swiftSettings: strict),
        .target(name: "BoardloopGPIOMock", dependencies: ["BoardloopGPIO", "Boardloop", "CLinux"], swiftSettings: strict),

        // Layer 4 and 5: board descriptions and detection; the daemon library
        // (config language, loading, validation, the resolved model).
        .target(
            name: "BoardSupport", dependencies: ["BoardloopGPIO", "BoardControl", "Clibyaml"],
            // Every board file, compiled in (links to boards/, the only
            // copies) as the catalog's built-in boards: a boardd copied
            // anywhere knows every board; files in /etc/boardd/boards and
            // /usr/share/boardd/boards override them by name (docs/deploy.md).
            resources: [
                .embedInCode("Boards/demo.yaml"), .embedInCode("Boards/generic.yaml"), .embedInCode("Boards/gpio-sim.yaml"),
                .embedInCode("Boards/raspberry-pi-1.yaml"), .embedInCode("Boards/raspberry-pi-2.yaml"),
                .embedInCode("Boards/raspberry-pi-3.yaml"), .embedInCode("Boards/raspberry-pi-4.yaml"),
                .embedInCode("Boards/raspberry-pi-400.yaml"), .embedInCode("Boards/raspberry-pi-5.yaml"),
                .embedInCode("Boards/raspberry-pi-500.yaml"), .embedInCode("Boards/raspberry-pi-zero.yaml"),
                .embedInCode("Boards/raspberry-pi-zero-w.yaml"), .embedInCode("Boards/raspberry-pi-zero-2-w.yaml"),
            ],
            swiftSettings: strict),
        .target(
            name: "BoardDaemon",
            dependencies: [
                "BoardSupport", "BoardloopGPIO", "BoardloopGPIOMock", "Boardloop", "CDaemon", "CLinux", "BoardControl", "CMosquitto",
                .product(name: "Logging", package: "swift-log"),
            ],
            // `boardd --demo`: the demo config and its scripted person,
            // compiled in (links to examples/, the only copies; the demo
            // board is built in with every board, in BoardSupport), so an
            // installed boardd needs no checkout.
            resources: [.embedInCode("Demo/demo-config.yaml"), .embedInCode("Demo/demo-script.yaml")],
            swiftSettings: strict),

        // The control socket's client side (socket path, one request, its reply,
        // the text a person reads), the rule both sides place the socket by,
        // and the release both executables print. Glibc only: boardctl
        // starts small.
        // BuildInfo (Plugins/BuildInfo, scripts/build-info.sh) gives it the
        // commit and the libgpiod the build is made from, for --version.
        .target(name: "BoardControl", swiftSettings: strict, plugins: [.plugin(name: "BuildInfo")]),
        .plugin(name: "BuildInfo", capability: .buildTool()),

        // The daemon's bits of libc Swift cannot call directly (variadic syscall, posix_spawn attributes).
        .target(name: "CDaemon"),

        // Layer 6: executables.
        .executableTarget(
            name: "boardd",
            dependencies: [
                "BoardDaemon", "BoardSupport", "BoardloopGPIO", "BoardControl", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict, linkerSettings: releaseLink),
        .executableTarget(
            name: "boardctl",
            dependencies: ["BoardControl", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict, linkerSettings: releaseLink),

        // Test support: an in-process malloc counter (interposes malloc & co. in the
        // executable that links it; counts only on threads that opt in).
        .target(name: "CAllocationCounter"),
        .target(name: "BoardloopTestSupport", dependencies: ["CAllocationCounter", "Boardloop"], swiftSettings: strict),

        // Examples.
        .executableTarget(name: "loop-demo", dependencies: ["Boardloop"], path: "examples/loop-demo", swiftSettings: strict),
        .executableTarget(
            name: "gpio-button-led", dependencies: ["BoardloopGPIO", "BoardloopGPIOMock", "Boardloop"],
            path: "examples/gpio-button-led", swiftSettings: strict),
        // Runs the gpio-sim scenarios in a qemu guest, on libgpiod 1.6 and 2.x (scripts/sim-test.sh).
        .executableTarget(name: "gpio-sim-guest", dependencies: ["BoardloopGPIO", "Boardloop"], swiftSettings: strict),
        .executableTarget(name: "worker-demo", dependencies: ["Boardloop"], path: "examples/worker-demo", swiftSettings: strict),

        // Tests. BoardloopXCTestSupport: loops that end when each test finishes.
        .target(name: "BoardloopXCTestSupport", dependencies: ["Boardloop", "CLinux"], path: "Tests/BoardloopXCTestSupport", swiftSettings: strict),
        .testTarget(
            name: "BoardloopTests", dependencies: ["Boardloop", "BoardloopTestSupport", "BoardloopXCTestSupport", "CLinux", "worker-demo"],
            swiftSettings: strict),
        .testTarget(
            name: "BoardloopCFDifferentialTests", dependencies: ["Boardloop", "BoardloopTestSupport", "BoardloopXCTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "BoardloopGPIOTests",
            dependencies: ["BoardloopGPIO", "BoardloopGPIOMock", "Boardloop", "BoardloopTestSupport", "BoardloopXCTestSupport", "CGPIOD", "CLinux"],
            swiftSettings: strict),
        .testTarget(name: "BoardSupportTests", dependencies: ["BoardSupport", "BoardControl", "BoardloopGPIOMock"], exclude: ["Fixtures"], swiftSettings: strict),
        // Depends on `boardd` so the binary its CLI tests run is built first.
        .testTarget(
            name: "BoardDaemonTests",
            dependencies: [
                "BoardDaemon", "BoardSupport", "BoardloopGPIO", "BoardloopGPIOMock", "Boardloop", "BoardloopTestSupport", "boardd", "CDaemon",
                "Clibmosquitto",
            ], exclude: ["Fixtures"],
            swiftSettings: strict),
        // A fake boardd in each test, and the built boardctl against the built boardd (--mock): it depends on both so they are built first.
        .testTarget(name: "BoardControlTests", dependencies: ["BoardControl", "boardctl", "boardd"], swiftSettings: strict),
    ]
)
