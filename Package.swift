// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Stratus",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Stratus", targets: ["Stratus"]),
        .library(name: "StratusSQLite", targets: ["StratusSQLite"]),
        .library(name: "StratusPostgres", targets: ["StratusPostgres"]),
        .library(name: "StratusTransfer", targets: ["StratusTransfer"]),
        .library(name: "StratusStores", targets: ["StratusStores"]),
        .library(name: "CloudKit", targets: ["CloudKit"]),
        .library(name: "CoreLocation", targets: ["CoreLocation"]),
        .executable(name: "stratus", targets: ["stratus"]),
    ],
    dependencies: [],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(name: "Stratus"),
        // A seeded random generator for tests, samples and benchmarks (not part of the library).
        .target(name: "SeededRandom"),
        // What every SQL engine shares: the translation of queries into SQL, spelled by a dialect.
        .target(name: "StratusSQL", dependencies: ["Stratus"]),
        .target(name: "StratusSQLite", dependencies: ["Stratus", "StratusSQL", "CSQLite"]),
        .target(name: "StratusPostgres", dependencies: ["Stratus", "StratusSQL", "CLibPQ"]),
        .target(name: "StratusTransfer", dependencies: ["Stratus"]),
        .target(name: "StratusStores", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres"]),
        // `import CloudKit` on Linux: Stratus with CloudKit's `CK` names.
        // `import CoreLocation` on Linux: CLLocation and its companions as Stratus's location values.
        .target(name: "CoreLocation", dependencies: ["Stratus"]),
        .target(name: "CloudKit", dependencies: ["CoreLocation", "Stratus", "StratusSQLite", "StratusPostgres", "StratusStores"]),
        .executableTarget(name: "stratus", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusStores", "StratusTransfer"]),
        // Benchmarks, run through scripts/bench-*.
        .executableTarget(name: "stratus-bench", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusTransfer", "SeededRandom"], path: "Sources/StratusBench"),

        // Runnable samples (see README): the apps CloudKit tutorials build, as command-line programs.
        .executableTarget(name: "notes", dependencies: ["Stratus", "StratusSQLite"], path: "samples/Notes"),
        .executableTarget(name: "todo", dependencies: ["Stratus", "StratusSQLite"], path: "samples/Todo"),
        .executableTarget(name: "shopping", dependencies: ["Stratus", "StratusSQLite"], path: "samples/Shopping"),
        .executableTarget(name: "pipeline", dependencies: ["Stratus", "StratusSQLite"], path: "samples/Pipeline"),
        .executableTarget(name: "reprice", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres"], path: "samples/Reprice"),
        .executableTarget(name: "churn", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "SeededRandom"], path: "samples/Churn"),
        .executableTarget(name: "stress", dependencies: ["Stratus", "StratusSQLite", "SeededRandom"], path: "samples/Stress"),

        // Shared test support: temporary stores, record builders, and the engine conformance suite.
        .target(name: "StratusTestSupport", dependencies: ["Stratus", "StratusPostgres", "SeededRandom"], path: "Tests/StratusTestSupport"),
        .testTarget(name: "StratusTests", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusTestSupport", "StratusTransfer", "SeededRandom"]),
        .testTarget(name: "StratusSQLiteTests", dependencies: ["Stratus", "StratusSQLite", "StratusTestSupport", "SeededRandom"]),
        .testTarget(name: "StratusTransferTests", dependencies: ["Stratus", "StratusTransfer", "SeededRandom"]),
        .testTarget(name: "StratusCLITests", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusTestSupport"]),
        .testTarget(name: "StratusStoresTests", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusStores", "StratusTestSupport"]),
        .testTarget(name: "StratusPostgresTests", dependencies: ["Stratus", "StratusPostgres", "StratusTestSupport", "SeededRandom"]),
        // CloudKit programs ported mechanically (see the README's "Porting CloudKit code"), compiled in Swift 5
        // language mode as most CloudKit app code is: test programs in CloudKit's style, and a
        // ported command-line sample run on Container.default().
        .testTarget(
            name: "CloudKitStyleTests", dependencies: ["Stratus", "StratusSQLite", "StratusPostgres", "StratusStores", "StratusTestSupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        // A stand-in for the libraries CloudKit programs use beside it (GRDB's Database and Record,
        // IceCream's SyncEngine, PostgresNIO's PostgresConnection…), whose names CloudKit's must not take.
        .target(name: "CloudKitNeighbour", path: "Tests/CloudKitNeighbour", swiftSettings: [.swiftLanguageMode(.v5)]),
        // CloudKit programs that compile unchanged against the CloudKit module (only the store
        // and user a test needs are its own), in Swift 5 language mode; files that check that
        // both spellings name the same types import Stratus too.
        .testTarget(
            name: "CloudKitNamesTests", dependencies: ["CloudKit", "CloudKitNeighbour", "Stratus", "StratusTestSupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        .executableTarget(
            name: "cloudkit-port", dependencies: ["CloudKit"], path: "samples/CloudKitPort",
            swiftSettings: [.swiftLanguageMode(.v5)]),
        // Codec throughput and a long fuzz run: swift run -c release stratus-transfer-bench [fuzz].
        .executableTarget(name: "stratus-transfer-bench", dependencies: ["Stratus", "StratusTransfer", "SeededRandom"], path: "Sources/StratusTransferBench"),
    ],
    swiftLanguageModes: [.v6]
)
