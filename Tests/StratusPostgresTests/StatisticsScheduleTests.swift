@testable import StratusPostgres
import Testing

/// When the engine asks PostgreSQL to analyze again: after 1,000 records inserted into a zone,
/// then each four times the last; and the zones it counts stay bounded in a long-lived process.
@Suite("PostgreSQL statistics schedule")
struct StatisticsScheduleTests {
    @Test func analysesComeAtFourfoldSteps() {
        var schedule = StatisticsSchedule()
        var due: [Bool] = []
        for counts: [Int64: Int] in [[7: 999], [7: 1], [7: 2_999], [7: 1], [8: 20_000], [8: 40_000], [8: 4_000]] {
            due.append(schedule.note(counts))
        }
        // The 1,000th record, the 4,000th; a zone that grew past several steps at once is due,
        // and then next at 64,000.
        #expect(due == [false, true, false, true, true, false, true])
        schedule.mayNotAnalyze = true
        let dueWithoutRight = schedule.note([9: 5_000])
        #expect(!dueWithoutRight, "a role that may not analyze never asks")
    }

    @Test func zonesCountedStayBounded() {
        var schedule = StatisticsSchedule()
        // A large zone, then a zone per user, each small, many more than are kept.
        let largeDue = schedule.note([0: 2_000])
        var smallDue = false
        var mostCounted = 0
        for zone in 1...Int64(3 * StatisticsSchedule.maximumZones) {
            smallDue = schedule.note([zone: 10]) || smallDue
            mostCounted = max(mostCounted, schedule.zonesCounted)
        }
        #expect(largeDue && !smallDue)
        #expect(mostCounted == StatisticsSchedule.maximumZones)
        // The large zone was kept: its next analysis is due at 4,000, not at 1,000 again.
        let (at3000, at4000) = (schedule.note([0: 1_000]), schedule.note([0: 1_000]))
        #expect(!at3000 && at4000)

        // When every zone reached an analysis, the largest quarter is kept to make room.
        var grown = StatisticsSchedule()
        var allDue = true
        for zone in 1...Int64(StatisticsSchedule.maximumZones) { allDue = grown.note([zone: zone == 7 ? 1_000_000 : 1_000]) && allDue }
        let newDue = grown.note([-1: 10])
        #expect(allDue && !newDue)
        #expect(grown.zonesCounted == StatisticsSchedule.maximumZones / 4 + 1)
        // The largest zone kept its step: due next at 1,024,000, not after 1,000 more.
        let (soon, atStep) = (grown.note([7: 1_000]), grown.note([7: 23_000]))
        #expect(!soon && atStep)
    }
}
