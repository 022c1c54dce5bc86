// swift-tools-version: 6.2
//
// boardloop's benchmarks: a package of their own so that the library's users
// never build package-benchmark.
//
//   BoardloopOps      package-benchmark (ordo-one/benchmark): per-operation
//                     figures with malloc counts.
//                     `swift package --disable-sandbox benchmark` here.
//   boardloop-bench   the side-by-side driver: boardloop against raw
//                     epoll/eventfd/timerfd (CBenchRaw) and Foundation's
//                     BoardRunLoop, in the same run; `scripts/bench.sh`.
//   boardd-bench      the daemon's in-process scenarios (reaction latency
//                     through boardd's config path vs a hand-written loop, a
//                     1 kHz critical task under a 20k edges/s flood);
//                     `scripts/bench-daemon.sh`, which adds the process
//                     figures (idle wake-ups, CPU, RSS, start to READY=1).
//   alloc-gate        fails when the engine allocates in steady state;
//                     `scripts/alloc-gate.sh`, run by .ci/run.
//   instr-driver      one scenario, a fixed number of events, for callgrind:
//                     `scripts/bench.sh --instructions`,
//                     `scripts/instruction-gate.sh` (run by .ci/run).
//   instr-daemon      the same for the daemon's reaction path (its own
//                     driver: instr-driver does not link the daemon).
import PackageDescription
import struct Foundation.URL

// SwiftPM names a path dependency after its folder (`main`, `boardloop`,
// whatever the clone is called), so the products are looked up under that.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let boardloop = root.lastPathComponent.lowercased()

// The benchmarks' own bookkeeping (the event counters and references their
// handlers keep) without the runtime's dynamic exclusivity checks, as the C
// references' plain `done++`: each access was a call into the runtime,
// about 76 instructions, none of them the engine's (76 of the fd
// scenario's instructions per event; six calls per message in the
// wall-clock message scenario). Only the benchmarks' own code: the
// libraries they measure keep their settings.
func withoutExclusivityChecks(_ mode: SwiftLanguageMode) -> [SwiftSetting] {
    [.swiftLanguageMode(mode), .unsafeFlags(["-enforce-exclusivity=unchecked"])]
}
let instructionDriverSettings = withoutExclusivityChecks(.v5)
let scenarioSettings = withoutExclusivityChecks(.v6)

let package = Package(
    name: "boardloop-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(name: "CBenchRaw"),
        // Fixed-count references (raw kernel, libuv) for instruction counts.
        .systemLibrary(name: "Clibuv", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        .target(name: "CInstrRef", dependencies: ["Clibuv", "CBenchRaw"]),
        .target(
            name: "BenchScenarios",
            dependencies: [
                "CBenchRaw",
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
                .product(name: "BoardloopTestSupport", package: boardloop),
            ],
            swiftSettings: scenarioSettings
        ),
        .executableTarget(name: "boardloop-bench", dependencies: ["BenchScenarios"], swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(
            name: "boardd-bench",
            dependencies: [
                "CBenchRaw",
                .product(name: "BoardDaemon", package: boardloop),
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
                .product(name: "BoardloopTestSupport", package: boardloop),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .executableTarget(name: "alloc-gate", dependencies: ["BenchScenarios"], swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(
            name: "instr-driver",
            dependencies: [
                "CInstrRef",
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
            ],
            swiftSettings: instructionDriverSettings),
        .executableTarget(
            name: "instr-daemon",
            dependencies: [
                .product(name: "BoardDaemon", package: boardloop),
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
            ],
            swiftSettings: instructionDriverSettings),
        .executableTarget(
            name: "BoardloopOps",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
            ],
            path: "Benchmarks/BoardloopOps",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
