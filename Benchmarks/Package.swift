// swift-tools-version: 6.1
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
//   alloc-gate        fails when the engine allocates in steady state;
//                     `scripts/alloc-gate.sh`, run by .ci/run.
import PackageDescription
import struct Foundation.URL

// SwiftPM names a path dependency after its folder (`main`, `boardloop`,
// whatever the clone is called), so the products are looked up under that.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let boardloop = root.lastPathComponent.lowercased()

let package = Package(
    name: "boardloop-benchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(name: "CBenchRaw"),
        .target(
            name: "BenchScenarios",
            dependencies: [
                "CBenchRaw",
                .product(name: "Boardloop", package: boardloop),
                .product(name: "BoardloopGPIO", package: boardloop),
                .product(name: "BoardloopGPIOMock", package: boardloop),
                .product(name: "BoardloopTestSupport", package: boardloop),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(name: "boardloop-bench", dependencies: ["BenchScenarios"], swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(name: "alloc-gate", dependencies: ["BenchScenarios"], swiftSettings: [.swiftLanguageMode(.v5)]),
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
