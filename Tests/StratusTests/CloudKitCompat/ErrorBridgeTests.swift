import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Errors bridge to NSError as CKError does")
struct ErrorBridgeTests {
    @Test("every CKError.Code case exists with CloudKit's number")
    func everyCode() {
        let numbers: [(StratusError.Code, Int)] = [
            (.internalError, 1), (.partialFailure, 2), (.networkUnavailable, 3), (.networkFailure, 4), (.badContainer, 5),
            (.serviceUnavailable, 6), (.requestRateLimited, 7), (.missingEntitlement, 8), (.notAuthenticated, 9),
            (.permissionFailure, 10), (.unknownItem, 11), (.invalidArguments, 12), (.resultsTruncated, 13),
            (.serverRecordChanged, 14), (.serverRejectedRequest, 15), (.assetFileNotFound, 16), (.assetFileModified, 17),
            (.incompatibleVersion, 18), (.constraintViolation, 19), (.operationCancelled, 20), (.changeTokenExpired, 21),
            (.batchRequestFailed, 22), (.zoneBusy, 23), (.badDatabase, 24), (.quotaExceeded, 25), (.zoneNotFound, 26),
            (.limitExceeded, 27), (.userDeletedZone, 28), (.tooManyParticipants, 29), (.alreadyShared, 30),
            (.referenceViolation, 31), (.managedAccountRestricted, 32), (.participantMayNeedVerification, 33),
            (.serverResponseLost, 34), (.assetNotAvailable, 35), (.accountTemporarilyUnavailable, 36),
            (.participantAlreadyInvited, 37),
        ]
        for (code, number) in numbers {
            #expect(code.rawValue == number, "\(code)")
            #expect(StratusError.Code(rawValue: number) == code)
        }
        #expect(StratusError.Code.allCases.count == numbers.count)
        #expect(StratusError.Code.alreadyShared.description == "alreadyShared")
    }

    @Test("as? NSError and as! NSError cast a StratusError as they cast a CKError; a CKErrorDomain NSError casts back")
    func dynamicCastsToAndFromNSError() {
        let id = Record.ID(recordName: "movie-1")
        let error: any Error = StratusError(.partialFailure, userInfo: [
            PartialErrorsByItemIDKey: [id: StratusError(.unknownItem, userInfo: [ErrorRetryAfterKey: 2])],
        ])
        let nsError = error as Any as? NSError
        #expect(nsError?.domain == ErrorDomain)
        #expect(nsError?.code == StratusError.Code.partialFailure.rawValue)

        let userInfo = (error as NSError).userInfo
        let byItem = userInfo[PartialErrorsByItemIDKey] as? NSDictionary
        let itemValue: Any? = byItem?[id as Any]
        #expect((itemValue as? NSError)?.code == StratusError.Code.unknownItem.rawValue)
        #expect((userInfo[PartialErrorsByItemIDKey] as? [Record.ID: NSError])?[id]?.code == StratusError.Code.unknownItem.rawValue)

        let back = (itemValue as? NSError).map { $0 as Error } as? StratusError
        #expect(back?.code == .unknownItem)
        #expect(back?.retryAfterSeconds == 2)
        let made: Any = NSError(domain: ErrorDomain, code: StratusError.Code.zoneBusy.rawValue, userInfo: [ErrorRetryAfterKey: 1.5])
        #expect((made as? StratusError)?.code == .zoneBusy)
        #expect((made as? StratusError)?.retryAfterSeconds == 1.5)
        let foreign: Any = NSError(domain: NSCocoaErrorDomain, code: 4)
        #expect((foreign as? StratusError) == nil)
        #expect(StratusError(bridging: foreign as! NSError).code == .internalError)
    }

    @Test("Error._userInfo, _code and _domain answer as a CKError's do, through any Error")
    func underscoredErrorRequirements() {
        let error: any Error = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 3, "attempt": 2])
        let userInfo = error._userInfo as? NSDictionary
        #expect((userInfo?[ErrorRetryAfterKey] as? NSNumber)?.doubleValue == 3)
        #expect(userInfo?["attempt"] as? Int == 2)
        #expect(userInfo?[NSLocalizedDescriptionKey] as? String == (error as NSError).localizedDescription)
        #expect(error._code == StratusError.Code.zoneBusy.rawValue)
        #expect(error._domain == ErrorDomain)
    }

    @Test("a missing record's error: CKErrorDomain, code 11, the message as localizedDescription")
    func unknownItem() async throws {
        try await SQLiteFixture.with { fixture in
            let error = try #require(await caughtError { try await fixture.database.record(for: Record.ID(recordName: "missing")) })
            let nsError = error as NSError
            #expect(nsError.domain == "CKErrorDomain")
            #expect(nsError.domain == ErrorDomain)
            #expect(StratusError.errorDomain == "CKErrorDomain")
            #expect(nsError.code == 11)
            let message = try #require((error as? StratusError)?.message)
            #expect(nsError.localizedDescription == message)
            #expect(error.localizedDescription == message)
            #expect(nsError.userInfo[NSLocalizedDescriptionKey] as? String == message)
            #expect(StratusError.unknownItem ~= error)
        }
    }

    @Test("a partial failure carries CKPartialErrorsByItemIDKey keyed by record ID; partialErrorsByItemID too")
    func partialFailureByRecord() async throws {
        try await SQLiteFixture.with { fixture in
            let good = Record(recordType: "Item", recordID: Record.ID(recordName: "good"))
            let bad = Record(recordType: "Item", recordID: Record.ID(recordName: "_bad"))
            let op = ModifyRecordsOperation(recordsToSave: [good, bad])
            op.isAtomic = false
            let final = Box<Result<Void, any Error>?>(nil)
            op.modifyRecordsResultBlock = { final.value = $0 }
            await run(op, on: fixture.database)
            guard case .failure(let error)? = final.value else {
                Issue.record("expected a partial failure")
                return
            }
            let nsError = error as NSError
            #expect(nsError.domain == "CKErrorDomain")
            #expect(nsError.code == StratusError.Code.partialFailure.rawValue)
            let partial = try #require(nsError.userInfo["CKPartialErrors"] as? [AnyHashable: any Error])
            #expect(partial.count == 1)
            let itemError = try #require(partial[AnyHashable(bad.recordID)])
            #expect((itemError as NSError).code == StratusError.Code.invalidArguments.rawValue)
            #expect((itemError as NSError).domain == "CKErrorDomain")
            #expect((error as? StratusError)?.partialErrorsByItemID?[AnyHashable(bad.recordID)] != nil)
            #expect(nsError.userInfo[PartialErrorsByItemIDKey] as? NSDictionary != nil)
        }
    }

    @Test("a zone operation's partial failure is keyed by zone ID")
    func partialFailureByZone() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let missing = RecordZone.ID(zoneName: "Missing")
            let op = FetchRecordZonesOperation(recordZoneIDs: [missing, .default])
            let final = Box<Result<Void, any Error>?>(nil)
            op.fetchRecordZonesResultBlock = { final.value = $0 }
            await run(op, on: database)
            let error = try #require(finalError(final.value))
            #expect(error.code == .partialFailure)
            let partial = try #require(error.partialErrorsByItemID)
            #expect(partial.count == 1)
            #expect((partial[AnyHashable(missing)] as? StratusError)?.code == .zoneNotFound)
            let bridged = (error as NSError).userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: any Error]
            #expect(bridged?.keys.first == AnyHashable(missing))
        }
    }

    @Test("a conflict carries the server, client and ancestor records under CloudKit's keys")
    func serverRecordChanged() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let original = Record(recordType: "Note", recordID: Record.ID(recordName: "n1"))
            original["title"] = "first"
            let stored = try await database.save(original)
            let mine = stored.copy() as! Record
            let theirs = stored.copy() as! Record
            theirs["title"] = "theirs"
            try await database.save(theirs)
            mine["title"] = "mine"
            let error = try #require(await caughtError { try await database.save(mine) })
            let nsError = error as NSError
            #expect(nsError.code == 14)
            let server = try #require(nsError.userInfo["ServerRecord"] as? Record)
            let client = try #require(nsError.userInfo[RecordChangedErrorClientRecordKey] as? Record)
            let ancestor = try #require(nsError.userInfo[RecordChangedErrorAncestorRecordKey] as? Record)
            #expect(server["title"] as? String == "theirs")
            #expect(client["title"] as? String == "mine")
            #expect(ancestor["title"] as? String == "first")
            #expect((error as? StratusError)?.serverRecord?["title"] as? String == "theirs")
        }
    }

    @Test("retryAfterSeconds is CKErrorRetryAfterKey, an NSNumber that reads as Double")
    func retryAfter() {
        let error: any Error = StratusError(.zoneBusy, "the store is busy", retryAfterSeconds: 2.5)
        let nsError = error as NSError
        #expect(nsError.code == 23)
        #expect(nsError.userInfo["CKRetryAfter"] as? Double == 2.5)
        #expect((nsError.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue == 2.5)
        #expect((error as? StratusError)?.retryAfterSeconds == 2.5)
        #expect(StratusError(.internalError, "x").userInfo[ErrorRetryAfterKey] == nil)
    }

    @Test("errors built from CloudKit's userInfo keys, and NSErrors in CKErrorDomain, read back as StratusErrors")
    func buildingAndBridgingBack() {
        let itemID = Record.ID(recordName: "a")
        let zoneID = RecordZone.ID(zoneName: "Z")
        let built = StratusError(.partialFailure, userInfo: [
            NSLocalizedDescriptionKey: "two failed",
            ErrorRetryAfterKey: 3.0,
            PartialErrorsByItemIDKey: [AnyHashable(itemID): StratusError(.unknownItem), AnyHashable(zoneID): StratusError(.zoneNotFound)] as [AnyHashable: any Error],
        ])
        #expect(built.message == "two failed")
        #expect(built.retryAfterSeconds == 3.0)
        #expect(built.partialErrorsByRecordID[itemID]?.code == .unknownItem)
        #expect(built.partialErrorsByZoneID[zoneID]?.code == .zoneNotFound)
        #expect(StratusError(.networkFailure).message == "networkFailure")

        let nsError = NSError(domain: "CKErrorDomain", code: 7, userInfo: [NSLocalizedDescriptionKey: "slow down", "CKRetryAfter": NSNumber(value: 1.5)])
        let bridged = StratusError(bridging: nsError)
        #expect(bridged.code == .requestRateLimited)
        #expect(bridged.retryAfterSeconds == 1.5)
        #expect(bridged.message == "slow down")
        let roundTrip = StratusError(bridging: built as NSError)
        #expect(roundTrip.code == .partialFailure && roundTrip.partialErrorsByRecordID[itemID]?.code == .unknownItem)
        let foreign = StratusError(bridging: CocoaError(.fileNoSuchFile))
        #expect(foreign.code == .internalError && foreign.underlyingError != nil)
    }

    @Test("an error built from userInfo keeps every key, and reads retry-after given as Double, Int or NSNumber")
    func userInfoKeptAndRetryAfterTypes() {
        let built = StratusError(.serviceUnavailable, userInfo: [
            NSLocalizedDescriptionKey: "try later",
            ErrorRetryAfterKey: 2,
            "attempt": 3,
            "ServerErrorDescription": "overloaded",
            ErrorUserDidResetEncryptedDataKey: true,
        ])
        #expect(built.retryAfterSeconds == 2.0)
        #expect(built.message == "try later")
        #expect(built.userInfo["attempt"] as? Int == 3)
        #expect(built.userInfo["ServerErrorDescription"] as? String == "overloaded")
        #expect(built.userInfo[ErrorUserDidResetEncryptedDataKey] as? Bool == true)
        #expect((built.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue == 2.0)
        let nsError = built as NSError
        #expect(nsError.userInfo["attempt"] as? Int == 3)
        #expect(nsError.userInfo[NSLocalizedDescriptionKey] as? String == "try later")
        // Through NSError and back, the app's keys stay.
        let back = StratusError(bridging: nsError)
        #expect(back.userInfo["ServerErrorDescription"] as? String == "overloaded")
        #expect(back.retryAfterSeconds == 2.0)

        #expect(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 1.5]).retryAfterSeconds == 1.5)
        #expect(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: NSNumber(value: 4)]).retryAfterSeconds == 4.0)
        #expect(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: NSNumber(value: 0.25)]).retryAfterSeconds == 0.25)
        #expect(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: Int64(7)]).retryAfterSeconds == 7.0)
        #expect(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: Float(0.5)]).retryAfterSeconds == 0.5)
        // A value of no number type is no retry-after, and is kept as given.
        let odd = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: "soon"])
        #expect(odd.retryAfterSeconds == nil)
        #expect(odd.userInfo[ErrorRetryAfterKey] as? String == "soon")
        // Setting the property afterwards wins over what was kept.
        var changed = odd
        changed.retryAfterSeconds = 3
        #expect((changed.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue == 3)
        // Partial errors keyed by IDs of no kind Stratus knows are kept too.
        let partial = StratusError(.partialFailure, userInfo: [
            PartialErrorsByItemIDKey: [AnyHashable("custom-item"): StratusError(.unknownItem), AnyHashable(Record.ID(recordName: "a")): StratusError(.serverRecordChanged)] as [AnyHashable: any Error],
        ])
        #expect(partial.partialErrorsByRecordID[Record.ID(recordName: "a")]?.code == .serverRecordChanged)
        #expect(partial.partialErrorsByItemID?.count == 2)
        #expect((partial.partialErrorsByItemID?[AnyHashable("custom-item")] as? StratusError)?.code == .unknownItem)
    }

    @Test("catch by code with StratusError.<code>; a switch naming every case compiles")
    func patterns() async throws {
        try await SQLiteFixture.with { fixture in
            do {
                _ = try await fixture.database.record(for: Record.ID(recordName: "missing"))
                Issue.record("the fetch should fail")
            } catch StratusError.unknownItem {
                // matched by code
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
        #expect(Self.handling(.alreadyShared) == "sharing")
        #expect(Self.handling(.zoneBusy) == "retry")
        #expect(Self.handling(.unknownItem) == "other")
    }

    static func handling(_ code: StratusError.Code) -> String {
        switch code {
        case .alreadyShared, .tooManyParticipants, .participantMayNeedVerification, .participantAlreadyInvited: return "sharing"
        case .zoneBusy, .serviceUnavailable, .requestRateLimited, .networkFailure, .networkUnavailable, .serverResponseLost,
             .accountTemporarilyUnavailable: return "retry"
        case .internalError, .partialFailure, .badContainer, .missingEntitlement, .notAuthenticated, .permissionFailure,
             .unknownItem, .invalidArguments, .resultsTruncated, .serverRecordChanged, .serverRejectedRequest,
             .assetFileNotFound, .assetFileModified, .incompatibleVersion, .constraintViolation, .operationCancelled,
             .changeTokenExpired, .batchRequestFailed, .badDatabase, .quotaExceeded, .zoneNotFound, .limitExceeded,
             .userDeletedZone, .referenceViolation, .managedAccountRestricted, .assetNotAvailable: return "other"
        @unknown default: return "unknown"
        }
    }
}
