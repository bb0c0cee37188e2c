import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// My Spot's CloudKit view model (ramonteiro/mySpot: `My Spot/ViewModels/CloudKitViewModel.swift`),
// ported. A public-database app of the iOS 15 async API: spots saved with three `CKAsset`s
// written to temporary files and a `CLLocation`; a feed read with `records(matching:desiredKeys:
// resultsLimit:)` and `records(continuingMatchFrom:…)` under a predicate of
// `distanceToLocation:fromLocation:`, `userID != %@` and `self contains %@`, sorted by a
// `CKLocationSortDescriptor` next to `NSSortDescriptor`s; single fields fetched with
// `records(for:desiredKeys:)` and read back out of `results[id]` (with its `.none` case);
// counters bumped in place with `record["likes"]! += 1` (the typed subscript) on a record that was
// fetched with only some keys and saved again; and a query subscription, a database subscription
// on the shared database, and `allSubscriptions()`/`deleteSubscription(withID:)` to undo them.
//
// What the port changes: the README's substitutions (`CK` prefix, `NSPredicate` →
// `QueryPredicate` with `try`, `NSCompoundPredicate` → `QueryPredicate`, `NSSortDescriptor` →
// `RecordSortDescriptor`, `CLLocation` → `Location`); `var predicate = NSPredicate()` (a
// placeholder that every branch replaces) → `var predicate: QueryPredicate`, as the README says;
// `CKContainer.default()` → the `container` the test hands in (a store file per test; the app's
// calls are otherwise kept); `ObservableObject`/`@Published` dropped (plain properties, as the
// README says); `UIImage` → the stand-in below, which keeps the bytes. Left out: the UI,
// colours and notification permissions (UIKit and UserNotifications), `CKModifyBadgeOperation`
// (README: remove it), `fetchNotificationSpots` and `fetchAccountSpots` (the same record
// mapping as `fetchSpotPublic`), `checkDeepLink` (the same mapping on the main queue).

// MARK: - Linux stand-ins

/// UIKit's image, for the bytes the app reads out of each asset.
struct UIImage: Equatable {
    let data: Data
    init?(data: Data) {
        guard !data.isEmpty else { return nil }
        self.data = data
    }
}

extension String {
    /// The app's own `localized()` (Localizable.strings); English here.
    func localized() -> String { self }
}

// MARK: - SpotFromCloud (My Spot/Models/SpotFromCloud.swift), the fields the view model fills

struct SpotFromCloud {
    let id: String
    let name: String
    let founder: String
    let description: String
    let date: String
    let location: Location
    let type: String
    let imageURL: UIImage?
    let image2URL: UIImage?
    let image3URL: UIImage?
    let isMultipleImages: Int
    let likes: Int
    let offensive: Int
    let spam: Int
    let inappropriate: Int
    let dangerous: Int
    let customLocation: Int
    let locationName: String
    let userID: String
    let dateObject: Date?
    let record: Record
}

// MARK: - CloudKitViewModel.swift

final class CloudKitViewModel {

    // `@Published var …` in the app: plain properties here.
    var isSignedInToiCloud: Bool = false
    var accountStatus: AccountStatus?
    var isFetching = false
    var cursorMain: QueryOperation.Cursor?
    var userID: String = ""
    var limit = 5
    var radiusInMeters: Double { Double(UserDefaults.standard.integer(forKey: "savedDistance")) }
    let desiredKeys = ["name", "founder", "date", "location", "likes", "inappropriate", "offensive", "dangerous", "spam", "id", "userID", "type", "isMultipleImages", "locationName", "description", "customLocation", "dateObject"]

    /// `CKContainer.default()` in the app.
    let container: Container

    init(container: Container) {
        self.container = container
    }

    // MARK: - Spots

    func deleteSpot(id: String) async throws {
        let ckid = Record.ID(recordName: id)
        try await container.publicCloudDatabase.deleteRecord(withID: ckid)
    }

    func getLikes(idString: String) async throws -> Int? {
        if idString.isEmpty {
            return nil
        }
        let id = Record.ID(recordName: idString)
        let results = try await container.publicCloudDatabase.records(for: [id], desiredKeys: ["likes"])
        let record = results[id]
        switch record {
        case .success(let record):
            guard let likes = record["likes"] as? Int else { return nil }
            return likes
        case .failure(let error):
            print("\(error)")
            return nil
        case .none:
            print("error fetching likes, none case")
            return nil
        }
    }

    func addSpotToPublic(name: String, founder: String, date: String, locationName: String, x: Double, y: Double, description: String, type: String, image: Data, image2: Data?, image3: Data?, isMultipleImages: Int, customLocation: Bool, dateObject: Date?) async throws -> String {

        let newSpot = Record(recordType: "Spots")
        if let dateObject = dateObject {
            newSpot["dateObject"] = dateObject
        } else {
            newSpot["dateObject"] = nil
        }
        newSpot["name"] = name
        newSpot["founder"] = founder
        newSpot["description"] = description
        newSpot["date"] = date
        newSpot["locationName"] = locationName
        newSpot["location"] = Location(latitude: x, longitude: y)
        newSpot["type"] = type
        newSpot["id"] = UUID().uuidString
        newSpot["userID"] = userID
        newSpot["likes"] = 0
        newSpot["isMultipleImages"] = isMultipleImages
        newSpot["offensive"] = 0
        newSpot["inappropriate"] = 0
        newSpot["spam"] = 0
        newSpot["dangerous"] = 0
        if customLocation {
            newSpot["customLocation"] = 1
        } else {
            newSpot["customLocation"] = 0
        }

        if let image2 = image2 {
            do {
                let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
                let url = URL(fileURLWithPath: path)
                try image2.write(to: url)
                let asset = Asset(fileURL: url)
                newSpot["image2"] = asset
            } catch {
                print(error)
                return ""
            }
        }

        if let image3 = image3 {
            do {
                let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
                let url = URL(fileURLWithPath: path)
                try image3.write(to: url)
                let asset = Asset(fileURL: url)
                newSpot["image3"] = asset
            } catch {
                print(error)
                return ""
            }
        }

        do {
            let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
            let url = URL(fileURLWithPath: path)
            try image.write(to: url)
            let asset = Asset(fileURL: url)
            newSpot["image"] = asset
            try await container.publicCloudDatabase.save(newSpot)
            return newSpot.recordID.recordName
        } catch {
            print(error)
            return ""
        }
    }

    func fetchUserID() {
        container.fetchUserRecordID { [weak self] returnedID, returnedError in
            DispatchQueue.main.async {
                if let id = returnedID {
                    self?.userID = id.recordName
                }
            }
        }
    }

    func fetchImages(id: String) async -> [UIImage?] {
        do {
            let results = try await container.publicCloudDatabase.records(for: [Record.ID(recordName: id)], desiredKeys: ["image2", "image3"])
            let record = results[Record.ID(recordName: id)]
            switch record {
            case .success(let record):
                if let image3Check = record["image3"] as? Asset {
                    guard let image2Check = record["image2"] as? Asset else { return [] }
                    let image3URL = image3Check.fileURL ?? URL(fileURLWithPath: "none")
                    let image2URL = image2Check.fileURL ?? URL(fileURLWithPath: "none")
                    guard let data2 = try? Data(contentsOf: image2URL) else { return [] }
                    guard let data3 = try? Data(contentsOf: image3URL) else { return [] }
                    let image2 = UIImage(data: data2)
                    let image3 = UIImage(data: data3)
                    return [image2, image3]
                } else if let image2Check = record["image2"] as? Asset {
                    let image2URL = image2Check.fileURL ?? URL(fileURLWithPath: "none")
                    guard let data2 = try? Data(contentsOf: image2URL) else { return [] }
                    let image2 = UIImage(data: data2)
                    return [image2]
                } else {
                    return []
                }
            case .failure(let error):
                print("FETCH ERROR: \(error)")
                return []
            case .none:
                return []
            }
        } catch {
            return []
        }
    }

    func fetchMainImage(id: String) async -> UIImage? {
        do {
            let results = try await container.publicCloudDatabase.records(for: [Record.ID(recordName: id)], desiredKeys: ["image"])
            let record = results[Record.ID(recordName: id)]
            switch record {
            case .success(let record):
                guard let imageAsset = record["image"] as? Asset else { return nil }
                let imageURL = imageAsset.fileURL ?? URL(fileURLWithPath: "none")
                guard let imageData = try? Data(contentsOf: imageURL) else { return nil }
                let image = UIImage(data: imageData)
                return image

            case .failure(let error):
                print("FETCH ERROR: \(error)")
                return nil
            case .none:
                return nil
            }
        } catch {
            return nil
        }
    }

    func fetchSpotPublic(userLocation: Location, filteringBy: String, search: String) async throws -> [SpotFromCloud] {
        DispatchQueue.main.async {
            self.isFetching = true
        }
        var spots: [SpotFromCloud] = []
        // var predicate = NSPredicate()
        var predicate: QueryPredicate
        if radiusInMeters == 0 {
            predicate = QueryPredicate(value: true)
        } else {
            predicate = try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", userLocation, CGFloat(radiusInMeters))
        }
        let secondPredicate = try QueryPredicate(format: "userID != %@", self.userID)
        let compundPred = QueryPredicate(andPredicateWithSubpredicates: [predicate, secondPredicate])
        var query = Query(recordType: "Spots", predicate: compundPred)
        if !search.isEmpty {
            let predicate2 = try QueryPredicate(format: "self contains %@", search)
            let compoundPredicate = QueryPredicate(andPredicateWithSubpredicates: [predicate, predicate2, secondPredicate])
            query = Query(recordType: "Spots", predicate: compoundPredicate)
        }
        if filteringBy == "Closest".localized() {
            let distance = LocationSortDescriptor(key: "location", relativeLocation: userLocation)
            let creation = RecordSortDescriptor(key: "creationDate", ascending: false)
            query.sortDescriptors = [distance, creation]
        } else if filteringBy == "Downloads".localized() {
            let likes = RecordSortDescriptor(key: "likes", ascending: false)
            let distance = LocationSortDescriptor(key: "location", relativeLocation: userLocation)
            let creation = RecordSortDescriptor(key: "creationDate", ascending: false)
            query.sortDescriptors = [likes, distance, creation]
        } else if filteringBy == "Name".localized() {
            let name = RecordSortDescriptor(key: "name", ascending: true)
            let distance = LocationSortDescriptor(key: "location", relativeLocation: userLocation)
            let creation = RecordSortDescriptor(key: "creationDate", ascending: false)
            query.sortDescriptors = [name, distance, creation]
        } else if filteringBy == "Newest".localized() {
            let distance = LocationSortDescriptor(key: "location", relativeLocation: userLocation)
            let creation = RecordSortDescriptor(key: "creationDate", ascending: false)
            query.sortDescriptors = [creation, distance]
        }

        let results = try await container.publicCloudDatabase.records(matching: query, desiredKeys: desiredKeys, resultsLimit: limit)
        DispatchQueue.main.async {
            self.cursorMain = nil
        }
        results.matchResults.forEach { (_,result) in
            switch result {
            case .success(let record):
                    guard let name = record["name"] as? String else { return }
                    guard let founder = record["founder"] as? String else { return }
                    guard let date = record["date"] as? String else { return }
                    var dateObject: Date?
                    if let dateObj = record["dateObject"] as? Date {
                        dateObject = dateObj
                    } else {
                        dateObject = nil
                    }
                    guard let location = record["location"] as? Location else { return }
                    guard let likes = record["likes"] as? Int else { return }
                    guard let id = record["id"] as? String else { return }
                    guard let user = record["userID"] as? String else { return }
                    var customLocation = 0
                    if let customLocationChecked = record["customLocation"] as? Int {
                        customLocation = customLocationChecked
                    }
                    var isMultipleImages = 0
                    if let m = record["isMultipleImages"] as? Int {
                        isMultipleImages = m
                    }
                    var inappropriate = 0
                    var offensive = 0
                    var spam = 0
                    var dangerous = 0
                    if let inna = record["inappropriate"] as? Int {
                        inappropriate = inna
                    }
                    if let offen = record["offensive"] as? Int {
                        offensive = offen
                    }
                    if let sp = record["spam"] as? Int {
                        spam = sp
                    }
                    if let dan = record["dangerous"] as? Int {
                        dangerous = dan
                    }
                    var types = ""
                    var description = ""
                    var locationName = ""
                    if let typeCheck = record["type"] as? String {
                        types = typeCheck
                    }
                    if let descriptionCheck = record["description"] as? String {
                        description = descriptionCheck
                    }
                    if let locationNameCheck = record["locationName"] as? String {
                        locationName = locationNameCheck
                    }
                    spots.append(SpotFromCloud(id: id, name: name, founder: founder, description: description, date: date, location: location, type: types, imageURL: nil,  image2URL: nil , image3URL: nil, isMultipleImages: isMultipleImages , likes: likes, offensive: offensive, spam: spam, inappropriate: inappropriate, dangerous: dangerous, customLocation: customLocation, locationName: locationName, userID: user, dateObject: dateObject, record: record))
            case .failure(let error):
                print("\(error)")
                DispatchQueue.main.async {
                    self.isFetching = false
                }
                return
            }
        }

        DispatchQueue.main.async {
            self.isFetching = false
            self.cursorMain = results.queryCursor
        }
        return spots
    }

    func updateSpotPublic(id: String, newName: String, newDescription: String, newFounder: String, newType: String, imageChanged: Bool, image: Data?, image2: Data?, image3: Data?, isMultipleImages: Int) async throws -> Bool {
        if id.isEmpty {
            return false
        }
        let recordID = Record.ID(recordName: id)
        let record = try await container.publicCloudDatabase.record(for: recordID)
        record["name"] = newName
        record["description"] = newDescription
        record["type"] = newType
        record["founder"] = newFounder
        record["isMultipleImages"] = isMultipleImages
        if (imageChanged) {
            if let image3 = image3 {
                do {
                    let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
                    let url = URL(fileURLWithPath: path)
                    try image3.write(to: url)
                    let asset = Asset(fileURL: url)
                    record["image3"] = asset
                } catch {
                    print(error)
                    return false
                }
            } else {
                record["image3"] = nil
            }

            if let image2 = image2 {
                do {
                    let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
                    let url = URL(fileURLWithPath: path)
                    try image2.write(to: url)
                    let asset = Asset(fileURL: url)
                    record["image2"] = asset
                } catch {
                    print(error)
                    return false
                }
            } else {
                record["image2"] = nil
                record["image3"] = nil
            }

            if let image = image {
                do {
                    let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
                    let url = URL(fileURLWithPath: path)
                    try image.write(to: url)
                    let asset = Asset(fileURL: url)
                    record["image"] = asset
                } catch {
                    print(error)
                    return false
                }
            }
        }

        try await container.publicCloudDatabase.save(record)
        return true
    }

    func likeSpot(spot: SpotFromCloud) async -> Bool {
        guard let _ = spot.record["likes"] else { return false }
        let record = spot.record
        record["likes"]! += 1
        do {
            try await container.publicCloudDatabase.save(record)
            return true
        } catch {
            return false
        }
    }

    func report(spot: SpotFromCloud, report: String) async {
        guard let _ = spot.record[report] else { return }
        let record = spot.record
        record[report]! += 1
        do {
            try await container.publicCloudDatabase.save(record)
        } catch {
            print("failed to send report!")
        }
    }

    func fetchMoreSpotsPublic(cursor: QueryOperation.Cursor, desiredKeys: [String], resultLimit: Int) async -> [SpotFromCloud] {
        var spots: [SpotFromCloud] = []
        DispatchQueue.main.async {
            self.isFetching = true
        }
        do {
            let results = try await container.publicCloudDatabase.records(continuingMatchFrom: cursor, desiredKeys: desiredKeys, resultsLimit: resultLimit)
            results.matchResults.forEach { (_,result) in
                switch result {
                case .success(let record):
                        guard let name = record["name"] as? String else { return }
                        guard let founder = record["founder"] as? String else { return }
                        guard let date = record["date"] as? String else { return }
                        var dateObject: Date?
                        if let dateObj = record["dateObject"] as? Date {
                            dateObject = dateObj
                        } else {
                            dateObject = nil
                        }
                        guard let location = record["location"] as? Location else { return }
                        guard let likes = record["likes"] as? Int else { return }
                        guard let id = record["id"] as? String else { return }
                        guard let user = record["userID"] as? String else { return }
                        var customLocation = 0
                        if let customLocationChecked = record["customLocation"] as? Int {
                            customLocation = customLocationChecked
                        }
                        var isMultipleImages = 0
                        if let m = record["isMultipleImages"] as? Int {
                            isMultipleImages = m
                        }
                        var types = ""
                        var description = ""
                        var locationName = ""
                        if let typeCheck = record["type"] as? String {
                            types = typeCheck
                        }
                        if let descriptionCheck = record["description"] as? String {
                            description = descriptionCheck
                        }
                        if let locationNameCheck = record["locationName"] as? String {
                            locationName = locationNameCheck
                        }
                        // (the four report counters are read as in fetchSpotPublic; left out here)
                        spots.append(SpotFromCloud(id: id, name: name, founder: founder, description: description, date: date, location: location, type: types, imageURL: nil,  image2URL: nil , image3URL: nil, isMultipleImages: isMultipleImages , likes: likes, offensive: 0, spam: 0, inappropriate: 0, dangerous: 0, customLocation: customLocation, locationName: locationName, userID: user, dateObject: dateObject, record: record))

                case .failure(let error):
                    print("\(error)")
                    DispatchQueue.main.async {
                        self.isFetching = false
                    }
                    return
                }
            }

            DispatchQueue.main.async {
                self.isFetching = false
                self.cursorMain = results.queryCursor
            }
        } catch {
            DispatchQueue.main.async {
                self.isFetching = false
            }
        }
        return spots
    }

    // MARK: - Other

    func isBanned() async throws -> Bool {
        let predicate = try QueryPredicate(format: "userid == %@", userID)
        let query = Query(recordType: "Bans", predicate: predicate)
        let results = try await container.publicCloudDatabase.records(matching: query, resultsLimit: 1)
        if results.matchResults.isEmpty {
            UserDefaults.standard.set(false, forKey: "isBanned")
            return false
        } else {
            UserDefaults.standard.set(true, forKey: "isBanned")
            return true
        }
    }

    func getiCloudStatus() {
        container.accountStatus { [weak self] returnedStatus, returnedError in
            DispatchQueue.main.async {
                switch returnedStatus {
                case .couldNotDetermine:
                    self?.accountStatus = .couldNotDetermine
                    self?.isSignedInToiCloud = false
                case .available:
                    self?.isSignedInToiCloud = true
                    self?.fetchUserID()
                case .restricted:
                    self?.accountStatus = .restricted
                    self?.isSignedInToiCloud = false
                case .noAccount:
                    self?.accountStatus = .noAccount
                    self?.isSignedInToiCloud = false
                case .temporarilyUnavailable:
                    self?.accountStatus = .temporarilyUnavailable
                    self?.isSignedInToiCloud = false
                @unknown default:
                    self?.accountStatus = nil
                    self?.isSignedInToiCloud = false
                }
            }
        }
    }

    // MARK: - Notifications

    func unsubscribeAllPublic() async throws {
        let subs = try await container.publicCloudDatabase.allSubscriptions()
        for sub in subs {
            _ = try await container.publicCloudDatabase.deleteSubscription(withID: sub.subscriptionID)
        }
    }

    func unsubscribeAllShared() async throws {
        let subs = try await container.sharedCloudDatabase.allSubscriptions()
        for sub in subs {
            _ = try await container.sharedCloudDatabase.deleteSubscription(withID: sub.subscriptionID)
        }
    }

    func unsubscribeAllPrivate() async throws {
        let subs = try await container.privateCloudDatabase.allSubscriptions()
        for sub in subs {
            _ = try await container.privateCloudDatabase.deleteSubscription(withID: sub.subscriptionID)
        }
    }

    func subscribeToNewSpot(fixedLocation: Location) async throws {
        try? await unsubscribeAllPublic()
        let predicate = try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", fixedLocation, CGFloat(16093.4))
        let subscription = QuerySubscription(recordType: "Spots", predicate: predicate, options: .firesOnRecordCreation)
        let notification = Subscription.NotificationInfo()
        notification.alertLocalizationKey = "%1$@ was added to your area!"
        notification.alertLocalizationArgs = ["name"]
        notification.title = "My Spot"
        notification.alertBody = "%1$@ was added to your area!"
        notification.soundName = "default"
        notification.shouldBadge = true
        notification.desiredKeys = ["id"]
        notification.shouldSendContentAvailable = true
        subscription.notificationInfo = notification
        try await container.publicCloudDatabase.save(subscription)
    }

    func subscribeToShares() async throws {
        try? await unsubscribeAllShared()
        try? await unsubscribeAllPrivate()
        let subscription = DatabaseSubscription(subscriptionID: UUID().uuidString)
        let notification = Subscription.NotificationInfo()
        subscription.recordType = "cloudkit.share"
        notification.title = "My Spot"
        notification.alertBody = "Your friend's playlist has been modified.".localized()
        notification.soundName = "default"
        notification.shouldBadge = false
        notification.shouldSendContentAvailable = true
        subscription.notificationInfo = notification
        try await container.sharedCloudDatabase.save(subscription)
        let subscriptionPrivate = DatabaseSubscription(subscriptionID: UUID().uuidString)
        let notificationPrivate = Subscription.NotificationInfo()
        subscriptionPrivate.recordType = "cloudkit.share"
        notificationPrivate.title = "My Spot"
        notificationPrivate.alertBody = "Your shared playlist has been modified.".localized()
        notificationPrivate.soundName = "default"
        notificationPrivate.shouldBadge = false
        notificationPrivate.shouldSendContentAvailable = true
        subscriptionPrivate.notificationInfo = notificationPrivate
        try await container.privateCloudDatabase.save(subscriptionPrivate)
    }

    // MARK: - Account

    func addNewAccount(userid: String, name: String, pronoun: String, image: Data, bio: String, email: String, youtube: String, tiktok: String, insta: String) async throws {
        let newAccount = Record(recordType: "Accounts")
        newAccount["userid"] = userid
        newAccount["name"] = name
        newAccount["bio"] = bio
        newAccount["youtube"] = youtube
        newAccount["tiktok"] = tiktok
        newAccount["instagram"] = insta
        newAccount["email"] = email
        newAccount["isExplorer"] = false
        newAccount["pronoun"] = pronoun
        let path = NSTemporaryDirectory() + "imageTemp\(UUID().uuidString).png"
        let url = URL(fileURLWithPath: path)
        try image.write(to: url)
        let asset = Asset(fileURL: url)
        newAccount["image"] = asset
        try await container.publicCloudDatabase.save(newAccount)
    }

    func doesAccountExist(for userid: String) async -> Bool {
        let predicate = try! QueryPredicate(format: "userid == %@", userid)
        let query = Query(recordType: "Accounts", predicate: predicate)
        do {
            let results = try await container.publicCloudDatabase.records(matching: query, resultsLimit: 1)
            if results.matchResults.isEmpty {
                return false
            } else {
                results.matchResults.forEach { (_,result) in
                    switch result {
                    case .success(let record):
                        if let name = record["name"] {
                            UserDefaults.standard.set(name, forKey: "founder")
                        }
                    case .failure(let error):
                        print(error)
                    }
                }
                return true
            }
        } catch {
            return true
        }
    }

    func getDownloadsAndSpots(from userid: String) async throws -> [Int] {
        let predicate = try QueryPredicate(format: "userID == %@", userid)
        let query = Query(recordType: "Spots", predicate: predicate)
        let results = try await container.publicCloudDatabase.records(matching: query, desiredKeys: ["userID", "likes"])
        var downloads = 0
        results.matchResults.forEach { (_,result) in
            switch result {
            case .success(let record):
                guard let download = record["likes"] as? Int else { return }
                downloads += download
            case .failure(let error):
                print(error)
            }
        }
        return [downloads, results.matchResults.count]
    }

    func getMemberSince(fromid userid: String) async throws {
        let predicate = try QueryPredicate(format: "userid == %@", userid)
        let query = Query(recordType: "Accounts", predicate: predicate)
        let results = try await container.publicCloudDatabase.records(matching: query, desiredKeys: ["userid"])
        var date: Date?
        results.matchResults.forEach { (_,result) in
            switch result {
            case .success(let record):
                if let dateFetched = record.creationDate {
                    date = dateFetched
                }
            case .failure(let error):
                print(error)
            }
        }
        UserDefaults.standard.set(date, forKey: "accountdate")
    }

    func makeExplorer(id: Record.ID) async throws {
        let record = try await container.publicCloudDatabase.record(for: id)
        record["isExplorer"] = true
        try await container.publicCloudDatabase.save(record)
    }
}

// MARK: - Tests

/// Waits for the blocks the view model queued on the main queue (`DispatchQueue.main.async`),
/// which run in order before this one.
private func drainMainQueue() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.main.async { continuation.resume() }
    }
}

/// Drains the main queue until `condition` holds, for blocks queued from other queues' callbacks
/// (at most a minute, so a broken port fails instead of hanging).
private func drainMainQueue(until condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(60)
    while true {
        await drainMainQueue()
        if condition() { return }
        guard Date() < deadline else { throw StratusError(.internalError, "the view model's main-queue blocks did not arrive") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

private let cupertino = Location(latitude: 37.3230, longitude: -122.0322)

/// Adds a spot as the app does, with `userID` as its founder, `km` kilometres north of Cupertino.
private func addSpot(_ model: CloudKitViewModel, _ name: String, northKm km: Double, likes: Int = 0, description: String = "", images: Int = 1) async throws -> String {
    let id = try await model.addSpotToPublic(
        name: name, founder: "Founder", date: "March 7, 2022", locationName: "Cupertino",
        x: cupertino.coordinate.latitude + km / 111.0, y: cupertino.coordinate.longitude,
        description: description, type: "Park", image: Data("\(name)-1".utf8),
        image2: images > 1 ? Data("\(name)-2".utf8) : nil, image3: images > 2 ? Data("\(name)-3".utf8) : nil,
        isMultipleImages: images > 1 ? 1 : 0, customLocation: false, dateObject: nil)
    #expect(!id.isEmpty, "the spot \(name) was saved")
    if likes > 0 {
        let record = try await model.container.publicCloudDatabase.record(for: Record.ID(recordName: id))
        record["likes"] = likes
        try await model.container.publicCloudDatabase.save(record)
    }
    return id
}

/// `withContainer`, then removes the image files the app wrote into the temporary folder for its
/// assets (iOS empties an app's temporary folder itself; a test run here must not leave them).
private func withSpotContainer<T>(on engine: TestEngine, _ body: (Container) async throws -> T) async throws -> T {
    let folder = URL(fileURLWithPath: NSTemporaryDirectory())
    let before = Set((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
    defer {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        where name.hasPrefix("imageTemp") && name.hasSuffix(".png") && !before.contains(name) {
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
        }
    }
    return try await withContainer(on: engine, body)
}

@Suite("My Spot's public-database view model, ported", .serialized)
struct MySpotPublicDatabaseTests {
    @Test("a spot saved with three assets reads back its fields, its likes and its images by desired keys", arguments: TestEngine.all)
    func addAndFetchImages(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            let id = try await addSpot(model, "Rancho", northKm: 1, images: 3)

            #expect(try await model.getLikes(idString: id) == 0)
            #expect(try await model.getLikes(idString: "") == nil)
            #expect(await model.fetchMainImage(id: id) == UIImage(data: Data("Rancho-1".utf8)))
            #expect(await model.fetchImages(id: id) == [UIImage(data: Data("Rancho-2".utf8)), UIImage(data: Data("Rancho-3".utf8))])

            // A spot that is gone answers no likes (the result's `.failure`), and no images.
            try await model.deleteSpot(id: id)
            #expect(try await model.getLikes(idString: id) == nil)
            #expect(await model.fetchImages(id: id).isEmpty)
        }
    }

    @Test("the feed is the nearby spots of other users, by distance then newest, five a page and the rest from the cursor", arguments: TestEngine.all)
    func feedPages(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            // Seven spots from 1 to 7 km north, one 50 km north, and one of the user's own.
            for km in 1...7 { _ = try await addSpot(model, "Spot \(km)", northKm: Double(km)) }
            _ = try await addSpot(model, "Far away", northKm: 50)
            let viewer = CloudKitViewModel(container: container)
            viewer.userID = "_viewer"
            _ = try await addSpot(viewer, "Mine", northKm: 0.5)

            // The app's radius setting is in metres and the predicate takes kilometres (see
            // the README): 20 "metres" is a 20 km circle.
            UserDefaults.standard.set(20, forKey: "savedDistance")
            defer { UserDefaults.standard.removeObject(forKey: "savedDistance") }
            let first = try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Closest", search: "")
            await drainMainQueue()
            #expect(first.map(\.name) == ["Spot 1", "Spot 2", "Spot 3", "Spot 4", "Spot 5"])
            #expect(viewer.isFetching == false)
            let cursor = try #require(viewer.cursorMain, "five of seven: a cursor for the rest")

            // The desired keys hold no asset: the feed's records carry none.
            #expect(first[0].record["image"] == nil)
            #expect(first[0].likes == 0 && first[0].userID == "_founder" && first[0].locationName == "Cupertino")

            let more = await viewer.fetchMoreSpotsPublic(cursor: cursor, desiredKeys: viewer.desiredKeys, resultLimit: 5)
            await drainMainQueue()
            #expect(more.map(\.name) == ["Spot 6", "Spot 7"])
            #expect(viewer.cursorMain == nil, "the last page has no cursor")
        }
    }

    @Test("the feed sorts by downloads, by name and by newest, with distance after", arguments: TestEngine.all)
    func feedOrders(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            _ = try await addSpot(model, "Bravo", northKm: 3, likes: 10)
            _ = try await addSpot(model, "Alpha", northKm: 1, likes: 2)
            _ = try await addSpot(model, "Charlie", northKm: 2, likes: 10)
            let viewer = CloudKitViewModel(container: container)
            viewer.userID = "_viewer"
            UserDefaults.standard.set(0, forKey: "savedDistance")   // 0: no radius, every spot
            defer { UserDefaults.standard.removeObject(forKey: "savedDistance") }

            let byDownloads = try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Downloads", search: "")
            #expect(byDownloads.map(\.name) == ["Charlie", "Bravo", "Alpha"], "most likes first, then nearest")
            let byName = try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Name", search: "")
            #expect(byName.map(\.name) == ["Alpha", "Bravo", "Charlie"])
            let newest = try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Newest", search: "")
            #expect(newest.map(\.name) == ["Charlie", "Alpha", "Bravo"])
            await drainMainQueue()
        }
    }

    @Test("a search finds spots by the words of their text fields, within the radius", arguments: TestEngine.all)
    func search(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            _ = try await addSpot(model, "Waterfall trail", northKm: 1, description: "A hidden waterfall behind the old mill")
            _ = try await addSpot(model, "Skate park", northKm: 2, description: "Smooth bowls")
            _ = try await addSpot(model, "Lake view", northKm: 40, description: "Waterfall at the far end")
            let viewer = CloudKitViewModel(container: container)
            viewer.userID = "_viewer"
            UserDefaults.standard.set(10, forKey: "savedDistance")
            defer { UserDefaults.standard.removeObject(forKey: "savedDistance") }

            let found = try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Closest", search: "waterfall")
            #expect(found.map(\.name) == ["Waterfall trail"], "a word of the description, any case; the far one is outside 10 km")
            await drainMainQueue()
        }
    }

    @Test("likes and reports are bumped with `record[key]! += 1` on the feed's partial record, and the assets stay", arguments: TestEngine.all)
    func likeAndReport(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            let id = try await addSpot(model, "Pier", northKm: 1, images: 2)
            let viewer = CloudKitViewModel(container: container)
            viewer.userID = "_viewer"
            UserDefaults.standard.set(0, forKey: "savedDistance")
            defer { UserDefaults.standard.removeObject(forKey: "savedDistance") }
            let spot = try #require(try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Closest", search: "").first)

            #expect(await viewer.likeSpot(spot: spot))
            #expect(try await viewer.getLikes(idString: id) == 1)
            // The spot still holds the record as the feed fetched it: as on CloudKit, a save does
            // not move the change tag of the object it was given, so a second save of it is a
            // conflict, and the report is lost ("failed to send report!").
            #expect(await viewer.likeSpot(spot: spot) == false)
            await viewer.report(spot: spot, report: "spam")
            #expect(try await container.publicCloudDatabase.record(for: Record.ID(recordName: id))["spam"] as? Int == 0)
            // From a feed read again, the report is saved.
            let again = try #require(try await viewer.fetchSpotPublic(userLocation: cupertino, filteringBy: "Closest", search: "").first)
            await viewer.report(spot: again, report: "spam")
            await viewer.report(spot: again, report: "noSuchCounter")   // no such field: nothing saved
            let stored = try await container.publicCloudDatabase.record(for: Record.ID(recordName: id))
            #expect(stored["likes"] as? Int == 1)
            #expect(stored["spam"] as? Int == 1)
            #expect(stored["noSuchCounter"] == nil)
            // Saving a record fetched with only the feed's keys keeps the fields it did not carry.
            #expect(await viewer.fetchMainImage(id: id) == UIImage(data: Data("Pier-1".utf8)))
            #expect(await viewer.fetchImages(id: id) == [UIImage(data: Data("Pier-2".utf8))])
            await drainMainQueue()
        }
    }

    @Test("an update replaces the main image and removes the others", arguments: TestEngine.all)
    func update(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.userID = "_founder"
            let id = try await addSpot(model, "Bridge", northKm: 1, images: 3)
            let updated = try await model.updateSpotPublic(id: id, newName: "Golden Bridge", newDescription: "At sunset", newFounder: "F", newType: "View", imageChanged: true, image: Data("new".utf8), image2: nil, image3: nil, isMultipleImages: 0)
            #expect(updated)
            #expect(try await model.updateSpotPublic(id: "", newName: "", newDescription: "", newFounder: "", newType: "", imageChanged: false, image: nil, image2: nil, image3: nil, isMultipleImages: 0) == false)
            let stored = try await container.publicCloudDatabase.record(for: Record.ID(recordName: id))
            #expect(stored["name"] as? String == "Golden Bridge")
            #expect(stored["image2"] == nil && stored["image3"] == nil)
            #expect(await model.fetchMainImage(id: id) == UIImage(data: Data("new".utf8)))
        }
    }

    @Test("accounts: one is found by user ID, its name kept as founder, its creation date as member-since; a ban list is asked", arguments: TestEngine.all)
    func accounts(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            model.getiCloudStatus()
            // The status arrives on a queue of its own, hops to the main queue and then asks for
            // the user ID, whose answer hops again: wait for the last hop, not for a fixed number.
            try await drainMainQueue(until: { model.isSignedInToiCloud && !model.userID.isEmpty })
            #expect(model.isSignedInToiCloud)
            #expect(model.userID == (try await container.userRecordID()).recordName)

            #expect(await model.doesAccountExist(for: model.userID) == false)
            try await model.addNewAccount(userid: model.userID, name: "Isaac", pronoun: "he", image: Data("face".utf8), bio: "", email: "", youtube: "", tiktok: "", insta: "")
            #expect(await model.doesAccountExist(for: model.userID))
            #expect(UserDefaults.standard.string(forKey: "founder") == "Isaac")
            UserDefaults.standard.removeObject(forKey: "founder")

            try await model.getMemberSince(fromid: model.userID)
            let since = try #require(UserDefaults.standard.object(forKey: "accountdate") as? Date)
            #expect(abs(since.timeIntervalSinceNow) < 600)
            UserDefaults.standard.removeObject(forKey: "accountdate")

            let account = try #require(try await container.publicCloudDatabase.records(matching: Query(recordType: "Accounts", predicate: QueryPredicate(value: true))).matchResults.first?.0)
            try await model.makeExplorer(id: account)
            #expect(try await container.publicCloudDatabase.record(for: account)["isExplorer"] as? Bool == true)

            #expect(try await model.isBanned() == false)
            let ban = Record(recordType: "Bans")
            ban["userid"] = model.userID
            try await container.publicCloudDatabase.save(ban)
            #expect(try await model.isBanned())

            _ = try await addSpot(model, "One", northKm: 1, likes: 4)
            _ = try await addSpot(model, "Two", northKm: 2, likes: 3)
            #expect(try await model.getDownloadsAndSpots(from: model.userID) == [7, 2])
        }
    }

    @Test("subscriptions: a new-spot query subscription replaces the last one, and the share subscriptions go to the shared and private databases", arguments: TestEngine.all)
    func subscriptions(engine: TestEngine) async throws {
        try await withSpotContainer(on: engine) { container in
            let model = CloudKitViewModel(container: container)
            try await model.subscribeToNewSpot(fixedLocation: cupertino)
            try await model.subscribeToNewSpot(fixedLocation: cupertino)
            let publicSubscriptions = try await container.publicCloudDatabase.allSubscriptions()
            #expect(publicSubscriptions.count == 1, "each subscribe first deletes the ones before")
            let query = try #require(publicSubscriptions.first as? QuerySubscription)
            #expect(query.recordType == "Spots")
            #expect(query.querySubscriptionOptions == .firesOnRecordCreation)
            #expect(query.notificationInfo?.alertLocalizationArgs == ["name"])
            #expect(query.notificationInfo?.desiredKeys == ["id"])
            #expect(query.notificationInfo?.shouldBadge == true)

            try await model.subscribeToShares()
            try await model.subscribeToShares()
            let shared = try await container.sharedCloudDatabase.allSubscriptions()
            let mine = try await container.privateCloudDatabase.allSubscriptions()
            #expect(shared.count == 1 && mine.count == 1)
            #expect((mine.first as? DatabaseSubscription)?.recordType == "cloudkit.share")
            #expect((shared.first as? DatabaseSubscription)?.notificationInfo?.alertBody == "Your friend's playlist has been modified.")

            try await model.unsubscribeAllPublic()
            #expect(try await container.publicCloudDatabase.allSubscriptions().isEmpty)
        }
    }
}
