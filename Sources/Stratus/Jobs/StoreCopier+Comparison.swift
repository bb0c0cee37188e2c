import Foundation

extension StoreCopier {
    /// Counts and checksums every zone of the source and the same zone of the destination
    /// (and every zone only the destination holds records in), reading both again.
    ///
    /// A record's checksum covers its name, type, change tag, parent and field values, with
    /// assets by their size and content (each store names its copy of an asset its own way).
    /// Zone checksums add their records' checksums, so that they do not depend on the order
    /// records are read in.
    ///
    /// ```swift
    /// for zone in try await copier.compare() where !zone.matches {
    ///     print("\(zone.zone): source \(zone.source), destination \(zone.destination)")
    /// }
    /// ```
    ///
    /// - Returns: one comparison per zone, in the source's order, then the destination's own.
    /// - Throws: store errors (a zone missing from the destination counts as empty);
    ///   `CancellationError` once ``cancel()`` is called (a comparison reads both stores whole,
    ///   which a signal must not have to wait for).
    public func compare() async throws -> [ZoneComparison] {
        let source = self.source, destination = self.destination
        let sourceInventory = try await Self.offThePool { try source.inventory() }
        let destinationInventory = try await Self.offThePool { try destination.inventory() }
        var destinationTypes: [ZoneKey: Set<String>] = [:]
        var destinationCapabilities: [ZoneKey: RecordZone.Capabilities] = [:]
        var destinationOrder: [ZoneKey] = []
        for database in destinationInventory.databases {
            for zone in database.zones {
                let key = ZoneKey(database: database, zone: zone.zone.zoneID)
                // A default zone, which a database has from its first use (a write that found
                // nothing makes its row), counts only when it holds records, on either side; a
                // custom zone the source lacks differs even when empty.
                guard !zone.zone.zoneID.isDefault || zone.recordCounts.values.contains(where: { $0 > 0 }) else { continue }
                destinationCapabilities[key] = Self.comparedCapabilities(of: zone)
                destinationTypes[key] = Set(zone.recordCounts.keys)
                destinationOrder.append(key)
            }
        }
        var comparisons: [ZoneComparison] = []
        var compared: Set<ZoneKey> = []
        for database in sourceInventory.databases {
            for zone in database.zones {
                let key = ZoneKey(database: database, zone: zone.zone.zoneID)
                let types = Set(zone.recordCounts.keys).union(destinationTypes[key] ?? [])
                var there = try await digest(key, types: types, on: destination)
                there.capabilities = destinationCapabilities[key]
                var here = try await digest(key, types: types, on: source)
                here.capabilities = Self.comparedCapabilities(of: zone)
                comparisons.append(ZoneComparison(zone: key, source: here, destination: there))
                compared.insert(key)
            }
        }
        for key in destinationOrder where !compared.contains(key) {
            var there = try await digest(key, types: destinationTypes[key] ?? [], on: destination)
            there.capabilities = destinationCapabilities[key]
            comparisons.append(ZoneComparison(zone: key, source: ZoneDigest(), destination: there))
        }
        return comparisons
    }

    /// The capabilities a zone is compared by: as Stratus applies them (a default zone's are
    /// the default zone's, whatever a store made before that rule kept in its row); `nil` for a
    /// default zone without records, which counts as absent.
    private static func comparedCapabilities(of zone: StoreInventory.ZoneEntry) -> RecordZone.Capabilities? {
        guard !zone.zone.zoneID.isDefault || zone.recordCounts.values.contains(where: { $0 > 0 }) else { return nil }
        return ZoneRules.capabilities(of: zone.zone.zoneID, stored: zone.zone.capabilities)
    }

    /// The schemas (each container's, in each environment) the two stores do not hold alike:
    /// roles, record types, fields, indexes and grants, in any order. Empty when they match.
    ///
    /// ```swift
    /// for schema in try await copier.differingSchemas() { print("schema \(schema) differs") }
    /// ```
    ///
    /// - Returns: `container (environment)` for each schema that differs, sorted.
    /// - Throws: store errors.
    public func differingSchemas() async throws -> [String] {
        let source = self.source, destination = self.destination
        return try await Self.offThePool {
            let containers = Set(try source.inventory().containersWithSchemas).union(try destination.inventory().containersWithSchemas)
            var differing: [String] = []
            for identifier in containers.sorted() {
                for environment in Container.Environment.allCases {
                    let storageContainer = environment.storageContainer(for: identifier)
                    if try source.fetchSchema(storageContainer: storageContainer) != destination.fetchSchema(storageContainer: storageContainer) {
                        differing.append("\(identifier) (\(environment))")
                    }
                }
            }
            return differing
        }
    }

    /// The databases whose subscriptions differ between the source and the destination: each
    /// subscriber's IDs and definitions, in any order. Empty when they match.
    ///
    /// ```swift
    /// for database in try await copier.differingSubscriptions() { print("the subscriptions of \(database) differ") }
    /// ```
    ///
    /// - Returns: a description of each database whose subscriptions differ.
    /// - Throws: store errors.
    public func differingSubscriptions() async throws -> [String] {
        let source = self.source, destination = self.destination
        return try await Self.offThePool {
            var differing: [String] = []
            var seen: Set<String> = []
            // The destination's own databases too: a subscription only it holds differs.
            for database in try source.inventory().databases + destination.inventory().databases {
                let container = database.environment == .production ? "\(database.containerIdentifier) (production)" : database.containerIdentifier
                let name = "\(container) \(database.scope.name) database" + (database.owner.isEmpty ? "" : " of \(database.owner)")
                guard seen.insert(name).inserted else { continue }
                let context = Self.subscriptionContext(of: database)
                let want = Set(try source.fetchSubscriptions(in: context, subscriber: nil).subscriptions)
                let have = Set(try destination.fetchSubscriptions(in: context, subscriber: nil).subscriptions)
                if want != have { differing.append(name) }
            }
            return differing
        }
    }

    /// The count and checksum of a zone's records of `types`; a missing zone is empty.
    ///
    /// - Throws: store errors; `CancellationError` once the copier is cancelled.
    func digest(_ key: ZoneKey, types: Set<String>, on engine: any StorageEngine) async throws -> ZoneDigest {
        let database = Self.database(of: key, on: engine)
        var digest = ZoneDigest()
        for type in types.sorted(by: Self.precedes) {
            do {
                for try await record in database.allRecords(matching: Query(recordType: type), inZoneWith: key.zoneID, pageSize: 1_000) {
                    if isCancelled { throw CancellationError() }
                    digest.records += 1
                    digest.checksum &+= Self.checksum(of: record)
                }
            } catch let error as StratusError where error.code == .zoneNotFound {
                return ZoneDigest()
            }
        }
        return digest
    }

    /// A checksum of what a copy must keep of a record.
    static func checksum(of record: Record) -> UInt64 {
        var hash = RecordChecksum()
        hash.add(record.recordID.recordName)
        hash.add(record.recordType)
        hash.add(record.recordChangeTag ?? "")
        hash.add(record.parent?.recordID.recordName ?? "")
        for key in record.fieldValues.keys.sorted() {
            hash.add(key)
            hash.add(record.fieldValues[key]!)
        }
        return hash.value
    }
}

/// FNV-1a (64-bit) over a record's parts, each written with its length or type, so that
/// different records do not run together into the same bytes.
struct RecordChecksum {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add<Bytes: Sequence>(bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01b3
        }
    }

    mutating func add(_ number: UInt64) {
        withUnsafeBytes(of: number.littleEndian) { add(bytes: $0) }
    }

    mutating func add(_ text: String) {
        add(UInt64(text.utf8.count))
        add(bytes: text.utf8)
    }

    mutating func add(_ data: Data) {
        add(UInt64(data.count))
        add(bytes: data)
    }

    mutating func add(_ double: Double) { add(double.bitPattern) }

    mutating func add(_ date: Date) { add(date.timeIntervalSinceReferenceDate) }

    mutating func add(_ reference: Record.Reference) {
        add(reference.recordID.recordName)
        add(UInt64(reference.action.rawValue))
    }

    mutating func add(_ location: Location) {
        for part in [location.latitude, location.longitude, location.altitude, location.horizontalAccuracy, location.verticalAccuracy, location.course, location.speed] {
            add(part)
        }
        add(location.timestamp)
    }

    /// An asset by its size and content; an asset whose file cannot be read by its size alone.
    mutating func add(_ asset: Asset) {
        var content = RecordChecksum()
        var size: UInt64 = 0
        if let url = asset.contentURL, let handle = try? FileHandle(forReadingFrom: url) {
            defer { try? handle.close() }
            while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
                content.add(bytes: chunk)
                size += UInt64(chunk.count)
            }
            add(size)
            add(content.value)
        } else {
            add(UInt64(bitPattern: asset.size ?? -1))
            add("unreadable")
        }
    }

    mutating func add(_ value: FieldValue) {
        add(value.type.rawValue)
        switch value {
        case .string(let v): add(v)
        case .int64(let v): add(UInt64(bitPattern: v))
        case .double(let v): add(v)
        case .date(let v): add(v)
        case .bytes(let v): add(v)
        case .reference(let v): add(v)
        case .location(let v): add(v)
        case .asset(let v): add(v)
        case .stringList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .int64List(let v): add(UInt64(v.count)); v.forEach { add(UInt64(bitPattern: $0)) }
        case .doubleList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .dateList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .bytesList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .referenceList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .locationList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        case .assetList(let v): add(UInt64(v.count)); v.forEach { add($0) }
        }
    }
}
