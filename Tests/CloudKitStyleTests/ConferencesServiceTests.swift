import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A conference app's CloudKit service and model (Oliver-Binns/Conferences, the revision split
// into packages: Service/Sources/Service — CloudKitService.swift, Data/DataService.swift,
// Data/Queryable.swift, RecordTypes.swift, Subscription/{Subscription,Subscribable,
// SubscriptionService}.swift, Extensions/CloudKit+Concurrency.swift — and
// Model/Sources/Model — Conference.swift, Venue.swift, CFPSubmission.swift, Attendance.swift,
// CloudKitRecordType.swift, Extensions/CLLocationCoordinate2D+Codable.swift), ported
// mechanically. Its CloudKit habits: a `CKDatabase` extension of its own async wrappers over the
// completion-handler calls (`fetch(withRecordID:)` answering an optional, `save(_:)` redeclared
// with `@discardableResult`, `fetch(withSubscriptionID:)`, `fetchAllSubscriptions()`), and a
// query run as an `AsyncThrowingStream` fed by `recordMatchedBlock` and finished by
// `queryResultBlock`, read with `compactMap { try? await … }.reduce(into:)`; each record type
// naming its database as a `KeyPath<CKContainer, CKDatabase>` read with
// `container[keyPath:]`; a reference followed with a second fetch; `record["website"]
// .flatMap(URL.init)` (the typed subscript, its type inferred from `URL(string:)`); dates kept
// as a `[Date]` list read as a range; a `CLLocation` field read back as its coordinate, which
// the app makes `Codable` itself (as `[latitude, longitude]`, CoreLocation's being no
// `Codable`); `catch CKError.unknownItem` for "not subscribed"; query subscriptions saved
// without reading the answer.
// Substitutions besides the README's: the app's own `Subscription` and `SubscriptionType` meet
// Stratus's names once the prefix is dropped, so `CKSubscription` is `Stratus.Subscription`
// (README "Dropping the CK prefix can meet a type of the app's own"); the types are nested in
// `Conferences`, and the app's `CKDatabase` extension is `fileprivate`, because this test
// target is one module with other ports (the app's `Service` package held only its own files);
// the container is handed in (a store file per test) instead of `CKContainer.default()`, and
// `shared` is left out with it; `import Service` is gone (one file), and the namespace is
// `public` as the package's types were. One change is the toolchain's, not Stratus's: Swift 6's
// `AsyncSequence.compactMap` takes a `@Sendable` closure, which captures the service, so
// `CloudKitService` is declared `Sendable` (a public struct is not inferred so; the app built
// with this compiler on macOS warns the same).

public enum Conferences {
    // MARK: - Service/RecordTypes.swift

    public protocol RecordType {
        var name: String { get }
        var database: KeyPath<Container, Database> { get }
    }

    // MARK: - Service/Data/Queryable.swift, DataService.swift

    public protocol Queryable {
        static var recordType: RecordType { get }
        init?(record: Record, database: DataService) async throws
    }

    public protocol DataService {
        func retrieve<T: Queryable>() async throws -> [T]
        func retrieve<T: Queryable>(id: Record.ID) async throws -> T?
    }

    // MARK: - Service/Subscription

    public struct Subscription {
        let type: SubscriptionType
        let object: Subscribable.Type

        public init(toUpdates type: SubscriptionType,
                    subscribable: Subscribable.Type) {
            self.type = type
            self.object = subscribable
        }

        var id: String {
            "\(type.rawValue)\(object.recordType.name.capitalized)"
        }
    }

    public enum SubscriptionType: String {
        case new
        case edit
    }

    public protocol Subscribable {
        static var recordType: RecordType { get }
        static var info: Stratus.Subscription.NotificationInfo { get }
    }

    public protocol SubscriptionService {
        func isSubscribed(subscription: Subscription) async throws -> Bool
        func subscribe(_ subscription: Subscription) async throws
        func unsubscribe(_ subscription: Subscription) async throws
    }

    // MARK: - Service/CloudKitService.swift

    public struct CloudKitService: Sendable {
        private let container: Container

        init(container: Container) {
            self.container = container
        }
    }

    // MARK: - Model/Sources/Model

    enum CloudKitRecordType: String {
        case conference = "Conference"
        case venue = "Venue"
        case attendance = "CD_Attendance"
    }

    public struct Conference: Codable, Identifiable {
        public let id: UUID
        public let name: String
        public let website: URL?
        public let twitter: URL?
        public let venue: Venue

        public let cfpSubmission: CFPSubmission?
        public let dates: ClosedRange<Date>

        public var location: String {
            "\(venue.city), \(venue.country)"
        }

        public init(id: UUID = UUID(),
                    name: String,
                    website: URL?,
                    twitter: URL?,
                    venue: Venue,
                    cfpSubmission: CFPSubmission?,
                    dates: ClosedRange<Date>) {
            self.id = id
            self.name = name
            self.website = website
            self.twitter = twitter
            self.venue = venue
            self.cfpSubmission = cfpSubmission
            self.dates = dates
        }
    }

    public struct Venue: Codable, Identifiable {
        public let id: UUID
        public let name: String
        public let city: String
        public let country: String
        public let location: LocationCoordinate2D

        public init(id: UUID = UUID(),
                    name: String,
                    city: String,
                    country: String,
                    location: LocationCoordinate2D) {
            self.id = id
            self.name = name
            self.city = city
            self.country = country
            self.location = location
        }
    }

    public struct CFPSubmission: Codable {
        public let opens: Date
        public let closes: Date?

        public init(opens: Date, closes: Date?) {
            self.opens = opens
            self.closes = closes
        }

        public init?(dates: [Date]?) {
            guard let dates,
                  let opens = dates.first else { return nil }
            self.opens = opens
            self.closes = dates.count > 1 ? dates[1] : nil
        }
    }

    public struct Attendance {
        public let conferenceID: UUID

        public init(conferenceID: UUID) {
            self.conferenceID = conferenceID
        }
    }
}

extension Conferences.RecordType where Self: RawRepresentable,
                                       Self.RawValue == String {
    public var name: String {
        rawValue
    }
}

extension Conferences.Subscribable {
    public static var info: Stratus.Subscription.NotificationInfo {
        let info = Stratus.Subscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        return info
    }
}

extension Conferences.CloudKitService: Conferences.DataService {
    public func retrieve<T: Conferences.Queryable>() async throws -> [T] {
        let predicate = QueryPredicate(value: true)
        let query = Query(recordType: T.recordType.name, predicate: predicate)

        return try await container[keyPath: T.recordType.database]
            .run(query: query)
            .compactMap { try? await T(record: $0, database: self) }
            .reduce(into: [T](), {
                $0.append($1)
            })
    }


    public func retrieve<T: Conferences.Queryable>(id: Record.ID) async throws -> T? {
        guard let record = try await container[keyPath: T.recordType.database]
            .fetch(withRecordID: id) else {
            return nil
        }
        return try await T(record: record, database: self)
    }
}

extension Conferences.CloudKitService: Conferences.SubscriptionService {
    public func isSubscribed(subscription: Conferences.Subscription) async throws -> Bool {
        do {
            _ = try await container[keyPath: subscription.object.recordType.database]
                .fetch(withSubscriptionID: subscription.id)
            return true
        } catch StratusError.unknownItem {
            return false
        }
    }

    public func subscribe(_ sub: Conferences.Subscription) async throws {
        let options: QuerySubscription.Options =
            sub.type == .edit ?
            .firesOnRecordUpdate :
            .firesOnRecordCreation

        let subscription =  QuerySubscription(recordType: sub.object.recordType.name,
                                              predicate: QueryPredicate(value: true),
                                              subscriptionID: sub.id,
                                              options: options)
        subscription.notificationInfo = sub.object.info

        try await container[keyPath: sub.object.recordType.database]
            .save(subscription)
    }

    public func unsubscribe(_ subscription: Conferences.Subscription) async throws {
        try await container[keyPath: subscription.object.recordType.database]
            .deleteSubscription(withID: subscription.id)
    }
}

// MARK: - Service/Extensions/CloudKit+Concurrency.swift

fileprivate extension Database {
    func fetch(withRecordID id: Record.ID) async throws -> Record? {
        try await withCheckedThrowingContinuation { continuation in
            fetch(withRecordID: id) { record, error in
                if let error {
                    continuation.resume(with: .failure(error))
                } else {
                    continuation.resume(with: .success(record))
                }
            }
        }
    }

    func run(query: Query, priority: QualityOfService = .userInteractive) -> AsyncThrowingStream<Record, Error> {
        let operation = QueryOperation(query: query)
        operation.qualityOfService = priority

        return AsyncThrowingStream<Record, Error> { continuation in
            operation.recordMatchedBlock = { recordID, result in
                switch result {
                case .success(let record):
                    continuation.yield(record)
                case .failure(let error):
                    continuation.finish(throwing: error)
                }
            }

            operation.queryResultBlock = { result in
                switch result {
                case .success:
                    continuation.finish()
                case .failure(let error):
                    continuation.finish(throwing: error)
                }
            }

            add(operation)
        }
    }

    @discardableResult
    func save(_ record: Record) async throws -> Record {
        try await withCheckedThrowingContinuation { continuation in
            save(record) { record, error in
                if let record {
                    continuation.resume(with: .success(record))
                } else if let error {
                    continuation.resume(with: .failure(error))
                }
            }
        }
    }

    func fetch(withSubscriptionID id: Stratus.Subscription.ID) async throws -> Stratus.Subscription? {
        try await withCheckedThrowingContinuation { continuation in
            fetch(withSubscriptionID: id) { subscription, error in
                if let error {
                    continuation.resume(with: .failure(error))
                } else {
                    continuation.resume(with: .success(subscription))
                }
            }
        }
    }

    func fetchAllSubscriptions() async throws -> [Stratus.Subscription] {
        try await withCheckedThrowingContinuation { continuation in
            fetchAllSubscriptions { subscriptions, error in
                if let subscriptions {
                    continuation.resume(with: .success(subscriptions))
                } else if let error {
                    continuation.resume(with: .failure(error))
                }
            }
        }
    }
}

// MARK: - Model/Sources/Model (the CloudKit halves)

extension Conferences.CloudKitRecordType: Conferences.RecordType {
    var database: KeyPath<Container, Database> {
        switch self {
        case .attendance:
            return \.privateCloudDatabase
        default:
            return \.publicCloudDatabase
        }
    }
}

extension Conferences.Conference: Conferences.Queryable {
    public static var recordType: Conferences.RecordType {
        Conferences.CloudKitRecordType.conference
    }

    public init?(record: Record, database: Conferences.DataService) async throws {
        guard
            let id = UUID(uuidString: record.recordID.recordName),
            let name = record["name"] as? String,

            let venueRef = record["venue"] as? Record.Reference,
            let venue: Conferences.Venue = try await database.retrieve(id: venueRef.recordID),

            let dates = record["dates"] as? [Date],
            let startDate = dates.first,
            let endDate = dates.last else {
            return nil
        }
        self.init(id: id,
                  name: name,
                  website: record["website"].flatMap(URL.init),
                  twitter: record["twitter"].flatMap(URL.init),
                  venue: venue,
                  cfpSubmission: .init(dates: record["cfpSubmission"] as? [Date]),
                  dates: startDate...endDate)
    }
}

extension Conferences.Conference: Conferences.Subscribable {}

extension Conferences.Venue: Conferences.Queryable {
    public static var recordType: Conferences.RecordType {
        Conferences.CloudKitRecordType.venue
    }

    public init?(record: Record, database: Conferences.DataService) async {
        guard
            let id = UUID(uuidString: record.recordID.recordName),
            let name = record["name"] as? String,
            let city = record["city"] as? String,
            let country = record["country"] as? String,
            let location = record["location"] as? Location else {
            return nil
        }
        self.init(id: id,
                  name: name,
                  city: city,
                  country: country,
                  location: location.coordinate)
    }
}

extension Conferences.Attendance: Conferences.Queryable {
    public static var recordType: Conferences.RecordType {
        Conferences.CloudKitRecordType.attendance
    }

    public init?(record: Record, database: Conferences.DataService) async throws {
        guard let conferenceID = record["CD_conferenceId"] as? String,
              let conferenceUUID = UUID(uuidString: conferenceID) else {
            return nil
        }
        self.init(conferenceID: conferenceUUID)
    }
}

extension LocationCoordinate2D: Codable {
    public func encode(to encoder: Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(latitude)
        try container.encode(longitude)
    }

    public init(from decoder: Decoder) throws {
        var container = try decoder.unkeyedContainer()
        let latitude = try container.decode(LocationDegrees.self)
        let longitude = try container.decode(LocationDegrees.self)
        self.init(latitude: latitude, longitude: longitude)
    }
}

// MARK: - Tests

@Suite struct ConferencesServiceTests {
    typealias Conference = Conferences.Conference
    typealias Venue = Conferences.Venue

    static let venueID = UUID(uuidString: "6F1C1B0E-8D8E-4C55-9F3A-2B7E0C1D2E3F")!
    static let conferenceID = UUID(uuidString: "0A9B8C7D-6E5F-4A3B-8C2D-1E0F9A8B7C6D")!
    static let opens = Date(timeIntervalSince1970: 1_700_000_000)
    static let starts = Date(timeIntervalSince1970: 1_710_000_000)
    static let ends = Date(timeIntervalSince1970: 1_710_172_800)

    /// The public database as the app's back office fills it: a venue, and a conference that
    /// refers to it, its website and Twitter kept as strings.
    static func seed(_ container: Container, conferenceName: String = "Swift Island",
                     venueRecordName: String? = nil) async throws {
        let database = container.publicCloudDatabase
        let venue = Record(recordType: "Venue", recordID: Record.ID(recordName: venueID.uuidString))
        venue["name"] = "Texel Hotel"
        venue["city"] = "Texel"
        venue["country"] = "Netherlands"
        venue["location"] = Location(latitude: 53.05, longitude: 4.8)
        _ = try await database.save(venue)

        let conference = Record(recordType: "Conference", recordID: Record.ID(recordName: conferenceID.uuidString))
        conference["name"] = conferenceName
        conference["venue"] = Record.Reference(recordID: Record.ID(recordName: venueRecordName ?? venueID.uuidString),
                                               action: .none)
        conference["dates"] = [starts, ends]
        conference["website"] = "https://swiftisland.nl"
        conference["twitter"] = "https://twitter.com/swiftisland"
        conference["cfpSubmission"] = [opens]
        _ = try await database.save(conference)
    }

    @Test(arguments: TestEngine.all) func retrieveReadsEveryConferenceWithItsVenue(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.seed(container)
            let service = Conferences.CloudKitService(container: container)
            let conferences: [Conference] = try await service.retrieve()
            let conference = try #require(conferences.first)
            #expect(conferences.count == 1)
            #expect(conference.id == Self.conferenceID)
            #expect(conference.name == "Swift Island")
            #expect(conference.website == URL(string: "https://swiftisland.nl"))
            #expect(conference.twitter?.host == "twitter.com")
            #expect(conference.dates == Self.starts...Self.ends)
            #expect(conference.cfpSubmission?.opens == Self.opens)
            #expect(conference.cfpSubmission?.closes == nil)
            #expect(conference.venue.id == Self.venueID)
            #expect(conference.location == "Texel, Netherlands")
            #expect(conference.venue.location.latitude == 53.05)
            #expect(conference.venue.location.longitude == 4.8)
        }
    }

    /// A conference whose venue is gone: the venue's fetch fails with `unknownItem`, which the
    /// app's `try?` in `compactMap` turns into a dropped conference, not a thrown error.
    @Test(arguments: TestEngine.all) func aConferenceWhoseVenueIsMissingIsDropped(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.seed(container, venueRecordName: UUID().uuidString)
            let service = Conferences.CloudKitService(container: container)
            let conferences: [Conference] = try await service.retrieve()
            #expect(conferences.isEmpty)
        }
    }

    /// The wrapper answers `nil` only when CloudKit answers neither record nor error; a missing
    /// record is an error, so `retrieve(id:)` throws `unknownItem`.
    @Test(arguments: TestEngine.all) func retrieveByIDOfAMissingRecordThrowsUnknownItem(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = Conferences.CloudKitService(container: container)
            do {
                let venue: Venue? = try await service.retrieve(id: Record.ID(recordName: "nowhere"))
                Issue.record("expected unknownItem, got \(String(describing: venue))")
            } catch let error as StratusError {
                #expect(error.code == .unknownItem)
            }
        }
    }

    /// Attendance is the app's Core Data mirror (`CD_` names) in the private database: the record
    /// type's key path picks the database.
    @Test(arguments: TestEngine.all) func attendanceIsReadFromThePrivateDatabase(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let attendance = Record(recordType: "CD_Attendance")
            attendance["CD_conferenceId"] = Self.conferenceID.uuidString
            _ = try await container.privateCloudDatabase.save(attendance)
            let service = Conferences.CloudKitService(container: container)
            let attended: [Conferences.Attendance] = try await service.retrieve()
            #expect(attended.map(\.conferenceID) == [Self.conferenceID])
            let publicMatches = try await container.publicCloudDatabase.records(
                matching: Query(recordType: "CD_Attendance", predicate: QueryPredicate(value: true)))
            #expect(publicMatches.matchResults.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func subscribeIsSubscribedAndUnsubscribe(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.seed(container)
            let service = Conferences.CloudKitService(container: container)
            let newConferences = Conferences.Subscription(toUpdates: .new, subscribable: Conference.self)
            let edits = Conferences.Subscription(toUpdates: .edit, subscribable: Conference.self)
            #expect(newConferences.id == "newConference")
            #expect(try await service.isSubscribed(subscription: newConferences) == false)

            try await service.subscribe(newConferences)
            try await service.subscribe(edits)
            #expect(try await service.isSubscribed(subscription: newConferences))
            let saved = try await container.publicCloudDatabase.subscription(for: "editConference")
            let query = try #require(saved as? QuerySubscription)
            #expect(query.recordType == "Conference")
            #expect(query.querySubscriptionOptions == .firesOnRecordUpdate)
            #expect(query.notificationInfo?.shouldSendContentAvailable == true)

            try await service.unsubscribe(newConferences)
            #expect(try await service.isSubscribed(subscription: newConferences) == false)
            #expect(try await service.isSubscribed(subscription: edits))
        }
    }

    /// The app's own coding of a coordinate (`[latitude, longitude]`), as its file cache writes
    /// a conference list on iOS, where `CLLocationCoordinate2D` has no `Codable` of its own.
    @Test func aVenueEncodesItsCoordinateAsTheAppWrites() throws {
        let venue = Venue(id: Self.venueID, name: "Texel Hotel", city: "Texel", country: "Netherlands",
                          location: LocationCoordinate2D(latitude: 53.05, longitude: 4.8))
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = try #require(String(data: try encoder.encode(venue), encoding: .utf8))
        #expect(json.contains(#""location":[53.05,4.8]"#))
        let back = try JSONDecoder().decode(Venue.self, from: Data(json.utf8))
        #expect(back.location.latitude == 53.05 && back.location.longitude == 4.8)
    }
}
