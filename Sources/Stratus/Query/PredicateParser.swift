import Foundation

/// Parses the subset of the `NSPredicate` format language that CloudKit accepts into a ``QueryPredicate``.
///
/// Foundation on Linux cannot parse predicate format strings, so this is a small recursive-descent
/// parser over the UTF-8 bytes of the format. It reads tokens lazily, so the first problem in
/// reading order is the one reported. Everything CloudKit rejects (OR, ALL, ENDSWITH, LIKE,
/// MATCHES, comparison options, NOT over AND, …) is rejected here with a message naming the
/// problem, the 1-based line and column (columns count characters), and the input line with a
/// caret under the offending position.
///
/// Besides CloudKit's syntax it reads the literals that ``QueryPredicate/description`` prints for
/// values `NSPredicate` has no literal for: `REFERENCE("name", "zone", "owner")`,
/// `LOCATION(lat, lon, …)`, `BYTES("base64")`, and `CAST("inf", "NSNumber")`.
struct PredicateParser {
    /// How deep parentheses, `NOT`s, sets and function calls may nest. Deeper input is rejected
    /// rather than risking the stack.
    static let maximumDepth = 100

    /// How many conditions one predicate may join with AND (see
    /// ``QueryPredicate/maximumConditions``).
    static let maximumConditions = QueryPredicate.maximumConditions

    let format: String
    let arguments: [Any]

    init(format: String, arguments: [Any]) {
        self.format = format
        self.arguments = arguments
    }

    func parse() throws -> QueryPredicate {
        var machine = Machine(bytes: Array(format.utf8), arguments: arguments)
        return try machine.run()
    }
}

extension QueryPredicate {
    /// A Stratus limit: the most conditions (comparisons) one predicate may join with AND,
    /// 500. Engines translate a predicate into one SQL expression, and SQLite refuses
    /// expressions more than 1,000 levels deep (each joined condition is a level); a predicate
    /// format with more conditions is refused when it is parsed, and a predicate built in code
    /// (or read from a cursor) when its query runs, on every engine alike.
    ///
    /// ```swift
    /// let many = (0..<600).map { "n != \($0)" }.joined(separator: " AND ")
    /// _ = try? QueryPredicate(format: many)   // invalidArguments: more than 500 conditions
    /// ```
    public static let maximumConditions = 500

    /// The most values a query's predicate may compare with, its `IN` lists' values counted
    /// each: 30,000. Engines bind each as one SQL parameter and cap those differently
    /// (PostgreSQL at 65,535 a statement); a larger predicate is refused when its query runs,
    /// with `invalidArguments`, on every engine alike.
    ///
    /// ```swift
    /// let ids = (0..<40_000).map { Int64($0) }
    /// let query = Query(recordType: "Item", predicate: try QueryPredicate(format: "n IN %@", ids))   // refused when it runs
    /// ```
    public static let maximumValues = 30_000
}

// MARK: - Collection arguments

extension PredicateParser {
    /// The elements of a collection argument, as `NSPredicate` takes them: an array in its order;
    /// a `Set` or a dictionary's values (`NSPredicate` uses a dictionary's values)
    /// in no order, `unordered` saying so. `nil` for anything else.
    static func collectionElements(of value: Any) -> (elements: [Any], unordered: Bool)? {
        if let array = value as? [Any] { return (array, false) }
        if let dictionary = value as? [AnyHashable: Any] { return (Array(dictionary.values), true) }
        if let set = value as? Set<AnyHashable> { return (set.map(\.base), true) }
        return nil
    }

    /// A fixed order for the values of an unordered argument: Stratus's sort order, then the
    /// values' exact text for values the sort order holds equal, so that a predicate's text (and
    /// a cursor's query fingerprint) is the same in every process.
    static func setOrder(_ a: FieldValue, _ b: FieldValue) -> Bool {
        switch QueryRules.sortOrder(a, b) {
        case .orderedAscending: true
        case .orderedDescending: false
        case .orderedSame: exactText(a) < exactText(b)
        }
    }

    /// Text that tells every two distinct values apart: a location's every number in full (its
    /// `description` rounds them, as CoreLocation's does), a reference's zone owner and action.
    private static func exactText(_ value: FieldValue) -> String {
        func location(_ l: Location) -> String {
            "\(l.latitude) \(l.longitude) \(l.altitude) \(l.horizontalAccuracy) \(l.verticalAccuracy) \(l.course) \(l.speed) \(l.timestamp.timeIntervalSinceReferenceDate)"
        }
        func reference(_ r: Record.Reference) -> String {
            "\(r.recordID.recordName) \(r.recordID.zoneID.zoneName) \(r.recordID.zoneID.ownerName) \(r.action.rawValue)"
        }
        switch value {
        case .location(let l): return location(l)
        case .locationList(let list): return list.map(location).joined(separator: ";")
        case .reference(let r): return reference(r)
        case .referenceList(let list): return list.map(reference).joined(separator: ";")
        default: return String(describing: value)
        }
    }
}

// MARK: - Tokens

extension PredicateParser {
    /// Reserved words. They are keywords in any letter case unless written with a leading `#`.
    enum Keyword: String {
        case and, or, not, `in`, any, some, all, between, contains, beginswith, endswith, like, matches
        case tokenmatches, truepredicate, falsepredicate, yes, no, null, now, first, last, size
        case noneOf = "none"
        case trueValue = "true"
        case falseValue = "false"
        case nilValue = "nil"
        case selfValue = "self"

        /// Keywords that stay keywords when a `(` follows (`NOT (…)`); any other word before `(`
        /// is a function name.
        var isOperator: Bool {
            switch self {
            case .and, .or, .not, .in, .any, .some, .all, .noneOf, .between, .contains, .beginswith,
                .endswith, .like, .matches, .tokenmatches:
                true
            default: false
            }
        }
    }

    enum Placeholder: Equatable {
        case object, key, integer, double, cString
    }

    struct Token {
        enum Kind: Equatable {
            case end
            case identifier(String)
            case keyword(Keyword)
            /// A name directly followed by `(`; the `(` is the next token.
            case function(String)
            /// `distanceToLocation:fromLocation:`.
            case distanceFunction
            case string(String)
            case integer(Int64)
            case double(Double)
            case placeholder(Placeholder)
            case comparison(ComparisonOperator)
            case andSymbol, orSymbol, bang
            case leftParen, rightParen, leftBrace, rightBrace, leftBracket, rightBracket, comma, dot
        }

        var kind: Kind
        /// Byte offsets into the format.
        var start: Int
        var end: Int
    }

    /// What one side of a comparison turned out to be.
    enum Operand {
        case key(QueryKey)
        case value(FieldValue)
        case list([FieldValue])
        case distance(QueryKey, Location)
    }

    struct LocatedOperand {
        var operand: Operand
        var start: Int
    }

    enum Operator: Equatable {
        case compare(ComparisonOperator)
        case between, `in`, beginsWith, contains, tokenMatches

        var name: String {
            switch self {
            case .compare(let op): op.rawValue
            case .between: "BETWEEN"
            case .in: "IN"
            case .beginsWith: "BEGINSWITH"
            case .contains: "CONTAINS"
            case .tokenMatches: "TOKENMATCHES"
            }
        }
    }
}

fileprivate extension ComparisonOperator {
    /// The operator that keeps the meaning when the operands swap sides (`29 < age` is `age > 29`).
    var flipped: ComparisonOperator {
        switch self {
        case .equal, .notEqual: self
        case .less: .greater
        case .lessOrEqual: .greaterOrEqual
        case .greater: .less
        case .greaterOrEqual: .lessOrEqual
        }
    }
}

// MARK: - The parsing machine

extension PredicateParser {
    struct Machine {
        let bytes: [UInt8]
        let arguments: [Any]
        /// Where the lexer continues.
        var position = 0
        var token = Token(kind: .end, start: 0, end: 0)
        var previous: Token?
        var argumentIndex = 0
        var depth = 0
        /// Conditions read so far.
        var conditions = 0

        init(bytes: [UInt8], arguments: [Any]) {
            self.bytes = bytes
            self.arguments = arguments
        }

        mutating func run() throws -> QueryPredicate {
            try advance()
            previous = nil
            if token.kind == .end {
                throw failure("the predicate is empty; write TRUEPREDICATE to match every record", at: token.start)
            }
            let predicate = try parseConjunction()
            switch token.kind {
            case .end: break
            case .rightParen: throw failure("unbalanced ')': there is no '(' for it to close", at: token.start)
            default:
                throw failure("unexpected \(describe(token)) after a complete condition; join conditions with AND", at: token.start)
            }
            if argumentIndex < arguments.count {
                let given = arguments.count == 1 ? "1 argument was" : "\(arguments.count) arguments were"
                let used = argumentIndex == 0 ? "none" : "only \(argumentIndex)"
                throw failure("\(given) given but the format uses \(used)", at: bytes.count)
            }
            return predicate
        }

        // MARK: Grammar

        /// conjunction := unary ((AND | &&) unary)*
        mutating func parseConjunction() throws -> QueryPredicate {
            var items = [try parseUnary()]
            while true {
                switch token.kind {
                case .keyword(.and), .andSymbol:
                    try advance()
                    items.append(try parseUnary())
                case .keyword(.or), .orSymbol:
                    throw failure(
                        "OR is not supported by CloudKit; run one query per alternative, or use 'field IN {…}' for alternatives on one field",
                        at: token.start)
                default:
                    return PredicateParser.conjunction(items)
                }
            }
        }

        /// unary := (NOT | !) unary | '(' conjunction ')' | TRUEPREDICATE | FALSEPREDICATE | condition
        mutating func parseUnary() throws -> QueryPredicate {
            switch token.kind {
            case .keyword(.not), .bang:
                let notToken = token
                try enter(at: notToken)
                defer { depth -= 1 }
                try advance()
                let inner = try parseUnary()
                try checkNegatable(inner, at: notToken)
                return .not(inner)
            case .leftParen:
                let open = token
                try enter(at: open)
                defer { depth -= 1 }
                try advance()
                let inner = try parseConjunction()
                switch token.kind {
                case .rightParen: try advance()
                case .end: throw failure("this '(' is never closed; add a ')'", at: open.start)
                case .keyword(.or), .orSymbol: throw failure("OR is not supported by CloudKit", at: token.start)
                default: throw failure("expected AND or ')' but found \(describe(token))", at: token.start)
                }
                return inner
            case .keyword(.all):
                return try parseAll()
            case .keyword(.truepredicate):
                try advance()
                return .all
            case .keyword(.falsepredicate):
                try advance()
                return .none
            default:
                return .condition(try parseCondition())
            }
        }

        func checkNegatable(_ predicate: QueryPredicate, at notToken: Token) throws {
            if let problem = PredicateParser.negationProblem(predicate) { throw failure(problem, at: notToken.start) }
        }

        mutating func parseCondition() throws -> Condition {
            conditions += 1
            if conditions > PredicateParser.maximumConditions {
                throw failure(
                    "the predicate joins more than \(PredicateParser.maximumConditions) conditions, the most a query may have; use 'field IN {…}' for many values of one field, or split the query",
                    at: token.start)
            }
            switch token.kind {
            case .keyword(.any), .keyword(.some): return try parseAny()
            case .keyword(.all):
                try advance()
                return try parseTokenize(allTokens: true)
            case .keyword(.noneOf):
                throw failure("NONE is not supported by CloudKit; only ANY is", at: token.start)
            case .keyword(.selfValue): return try parseSelfContains()
            case .end: throw failure("expected a condition after \(describePrevious())", at: token.start)
            case .keyword(.and), .andSymbol:
                throw failure("expected a condition before \(describe(token))", at: token.start)
            case .rightParen:
                throw failure("expected a condition before ')'", at: token.start)
            default: break
            }
            let lhs = try parseOperand()
            let (op, opToken) = try parseOperator()
            // CloudKit compares its key for the parent with nil: `___parent == nil` finds a
            // hierarchy's top-level records. Every other key's nil is refused below.
            if case .key(.parent) = lhs.operand, case .compare(let comparison) = op, comparison == .equal || comparison == .notEqual, isNil(token) {
                try advance()
                return .hasParent(comparison == .notEqual)
            }
            let rhs = try parseOperand()
            return try build(lhs, op, opToken, rhs)
        }

        /// `ANY list == value`, `ANY list IN {…}`, `ANY list BEGINSWITH 'p'`, `ANY {…} == field`,
        /// and the spellings CloudKit's own translation of its query filters writes:
        /// `ANY {…} IN list` (any of the values is in the list, LIST_CONTAINS_ANY) and
        /// `ANY tokenize(%@, 'cdl') IN allTokens` (any of the words, CONTAINS_ANY_TOKENS).
        mutating func parseAny() throws -> Condition {
            let anyToken = token
            try advance()
            if case .function(let name) = token.kind, name.lowercased() == "tokenize" {
                return try parseTokenize(allTokens: false)
            }
            let lhs = try parseOperand()
            let (op, opToken) = try parseOperator()
            let rhs = try parseOperand()
            switch (lhs.operand, op, rhs.operand) {
            case (.key(let key), .compare(.equal), .value(let value)):
                return .listContains(key, value)
            case (.list(let values), .compare(.equal), .key(let key)):
                return .in(key, values)
            case (.key(let key), .in, .list(let values)), (.list(let values), .in, .key(let key)):
                return .listContainsAny(key, values)
            case (.value(let value), .in, .key(let key)):
                return .listContains(key, value)
            case (.key(let key), .beginsWith, .value(.string(let prefix))):
                return .listAnyBeginsWith(key, prefix)
            case (.key, .beginsWith, _):
                throw failure("BEGINSWITH needs a string on its right", at: rhs.start)
            case (.key, .compare(.equal), .list):
                throw failure("'ANY field ==' takes one value; use 'ANY field IN {…}' to match any of several", at: rhs.start)
            case (.key, .in, _):
                throw failure("'ANY field IN' needs a set {…} or an array argument on its right", at: rhs.start)
            case (.key, .compare(.equal), .key):
                throw failure("comparing two fields is not supported by CloudKit; compare a field with a value", at: rhs.start)
            case (.key, _, _), (.list, _, _):
                throw failure(
                    "ANY supports only ==, IN and BEGINSWITH in CloudKit, not \(op.name)", at: opToken.start)
            default:
                throw failure(
                    "ANY needs a list field after it ('ANY tags == \"red\"') or a set compared with a field ('ANY {\"a\", \"b\"} == color')",
                    at: anyToken.start)
            }
        }

        /// `ALL tokenize(%@, 'Cdl') IN allTokens`, the spelling of an all-words search that CloudKit
        /// code written for iOS uses, and `ALL {…} IN list`, every one of the values is in the
        /// list (CloudKit's LIST_CONTAINS_ALL, as its translation of query filters spells it):
        /// one `list CONTAINS value` per value. Any other ALL is rejected.
        mutating func parseAll() throws -> QueryPredicate {
            let allToken = token
            try advance()
            if case .function(let name) = token.kind, name.lowercased() == "tokenize" {
                conditions += 1
                return .condition(try parseTokenize(allTokens: true))
            }
            guard token.kind == .leftBrace || { if case .placeholder = token.kind { true } else { false } }() else {
                throw failure("ALL is supported only as 'ALL {…} IN list' (every value is in the list) or 'ALL tokenize(%@, \"cdl\") IN allTokens'", at: allToken.start)
            }
            let lhs = try parseOperand()
            guard token.kind == .keyword(.in) else {
                throw failure("ALL is supported only as 'ALL {…} IN list' (every value is in the list)", at: allToken.start)
            }
            try advance()
            let rhs = try parseOperand()
            let values: [FieldValue]
            switch lhs.operand {
            case .list(let list): values = list
            case .value(let value): values = [value]
            default: throw failure("'ALL … IN list' needs a set {…} or an array argument on its left", at: lhs.start)
            }
            guard case .key(let key) = rhs.operand else {
                throw failure("'ALL {…} IN' needs a list field on its right", at: rhs.start)
            }
            guard !values.isEmpty else {
                throw failure("'ALL {…} IN list' needs at least one value", at: lhs.start)
            }
            conditions += values.count
            if conditions > PredicateParser.maximumConditions {
                throw failure("the predicate joins more than \(PredicateParser.maximumConditions) conditions, the most a query may have", at: allToken.start)
            }
            return PredicateParser.conjunction(values.map { .condition(.listContains(key, $0)) })
        }

        /// `tokenize(%@, 'Cdl') IN allTokens` after ALL (every word) or ANY (any of the words).
        mutating func parseTokenize(allTokens: Bool) throws -> Condition {
            guard case .function(let name) = token.kind else {
                throw failure("expected tokenize(…)", at: token.start)
            }
            try enter(at: token)
            defer { depth -= 1 }
            let nameStart = token.start
            let args = try parseCallArguments(of: name)
            guard (1...2).contains(args.count), case .value(.string(let text)) = args[0].operand else {
                throw failure("tokenize needs the words to search for, as in tokenize(%@, 'Cdl')", at: nameStart)
            }
            if args.count == 2 {
                guard case .value(.string) = args[1].operand else {
                    throw failure("the options of tokenize must be a string such as 'Cdl'", at: args[1].start)
                }
            }
            guard token.kind == .keyword(.in) else {
                throw failure("expected 'IN allTokens' after tokenize(…)", at: token.start)
            }
            try advance()
            guard case .identifier("allTokens") = token.kind else {
                throw failure("expected 'IN allTokens' after tokenize(…)", at: token.start)
            }
            try advance()
            return PredicateParser.tokenCondition(TextSearch.tokens(in: text), allTokens: allTokens)
        }

        /// `self CONTAINS 'words'`: tokenized search over the string fields.
        mutating func parseSelfContains() throws -> Condition {
            let selfToken = token
            try advance()
            guard token.kind == .keyword(.contains) else {
                throw failure("self can only be used as 'self CONTAINS \"words\"' (tokenized search)", at: selfToken.start)
            }
            try advance()
            if token.kind == .leftBracket { throw optionsFailure() }
            let rhs = try parseOperand()
            guard case .value(.string(let text)) = rhs.operand else {
                throw failure("'self CONTAINS' needs a string of words to search for", at: rhs.start)
            }
            return PredicateParser.tokenCondition(TextSearch.tokens(in: text), allTokens: false)
        }

        mutating func parseOperator() throws -> (Operator, Token) {
            let opToken = token
            let op: Operator
            switch token.kind {
            case .comparison(let comparison): op = .compare(comparison)
            case .keyword(.between): op = .between
            case .keyword(.in): op = .in
            case .keyword(.beginswith): op = .beginsWith
            case .keyword(.contains): op = .contains
            case .keyword(.tokenmatches): op = .tokenMatches
            case .keyword(.endswith):
                throw failure("ENDSWITH is not supported by CloudKit; use BEGINSWITH, or 'self CONTAINS' for words", at: token.start)
            case .keyword(.like):
                throw failure("LIKE is not supported by CloudKit; use == or BEGINSWITH", at: token.start)
            case .keyword(.matches):
                throw failure("MATCHES (regular expressions) is not supported by CloudKit", at: token.start)
            case .end:
                throw failure(
                    "expected an operator (==, !=, <, <=, >, >=, BETWEEN, IN, BEGINSWITH or CONTAINS) after \(describePrevious())",
                    at: token.start)
            default:
                throw failure(
                    "expected an operator (==, !=, <, <=, >, >=, BETWEEN, IN, BEGINSWITH or CONTAINS) but found \(describe(token))",
                    at: token.start)
            }
            try advance()
            if token.kind == .leftBracket {
                if op == .tokenMatches { try skipTokenMatchOptions() } else { throw optionsFailure() }
            }
            return (op, opToken)
        }

        func optionsFailure() -> StratusError {
            failure(
                "comparison options such as [c] or [cd] are not supported by CloudKit; string equality (==, !=, IN) already ignores case, and BEGINSWITH and ordering comparisons are case-sensitive",
                at: token.start)
        }

        /// `TOKENMATCHES[cdl]`: the options are how CloudKit always tokenizes, so they are accepted and ignored.
        mutating func skipTokenMatchOptions() throws {
            try advance()
            guard case .identifier(let options) = token.kind,
                options.lowercased().allSatisfy({ "cdln".contains($0) })
            else { throw failure("expected TOKENMATCHES options such as [cdl]", at: token.start) }
            try advance()
            guard token.kind == .rightBracket else { throw failure("expected ']' after the options", at: token.start) }
            try advance()
        }

        func build(_ lhs: LocatedOperand, _ op: Operator, _ opToken: Token, _ rhs: LocatedOperand) throws -> Condition {
            let twoFields = "comparing two fields is not supported by CloudKit; compare a field with a value"
            switch op {
            case .compare(let comparison):
                switch (lhs.operand, rhs.operand) {
                case (.key(let key), .value(let value)): return .compare(key, comparison, value)
                case (.value(let value), .key(let key)): return .compare(key, comparison.flipped, value)
                case (.distance(let key, let origin), .value(let value)):
                    return try distance(key, origin, comparison, value, opToken: opToken, valueStart: rhs.start)
                case (.value(let value), .distance(let key, let origin)):
                    return try distance(key, origin, comparison.flipped, value, opToken: opToken, valueStart: lhs.start)
                case (.key, .key): throw failure(twoFields, at: rhs.start)
                case (.list, _): throw failure("a set or array can only be used with IN, BETWEEN or ANY", at: lhs.start)
                case (_, .list): throw failure("a set or array can only be used with IN, BETWEEN or ANY", at: rhs.start)
                case (.distance, _): throw failure("a distance must be compared with a number of kilometres", at: rhs.start)
                case (_, .distance): throw failure("a distance must be compared with a number of kilometres", at: lhs.start)
                case (.value, .value): throw failure("a comparison needs a field name on one side (a field named like a keyword, such as now, is written #now)", at: lhs.start)
                }
            case .between:
                guard case .key(let key) = lhs.operand else {
                    throw failure("BETWEEN needs a field name on its left", at: lhs.start)
                }
                guard case .list(let bounds) = rhs.operand else {
                    throw failure("BETWEEN needs two values in braces, {low, high}, or a two-element array argument", at: rhs.start)
                }
                guard bounds.count == 2 else {
                    throw failure("BETWEEN needs exactly two values {low, high}, not \(bounds.count)", at: rhs.start)
                }
                return .between(key, bounds[0], bounds[1])
            case .in:
                switch (lhs.operand, rhs.operand) {
                case (.key(let key), .list(let values)): return .in(key, values)
                case (.value(let value), .key(let key)): return .listContains(key, value)
                case (.key, .key): throw failure(twoFields, at: rhs.start)
                case (.key, _):
                    throw failure("IN needs a set {…} or an array argument on its right", at: rhs.start)
                default:
                    throw failure("IN needs a field name on one side ('color IN {…}' or '\"red\" IN tags')", at: lhs.start)
                }
            case .beginsWith:
                guard case .key(let key) = lhs.operand else {
                    throw failure("BEGINSWITH needs a field name on its left", at: lhs.start)
                }
                guard case .value(.string(let prefix)) = rhs.operand else {
                    throw failure("BEGINSWITH needs a string on its right", at: rhs.start)
                }
                return .beginsWith(key, prefix)
            case .contains:
                switch (lhs.operand, rhs.operand) {
                case (.key(let key), .value(let value)): return .listContains(key, value)
                case (.key, .key): throw failure(twoFields, at: rhs.start)
                case (.key, _):
                    throw failure("CONTAINS takes one value; use 'ANY field IN {…}' to match any of several", at: rhs.start)
                default:
                    throw failure(
                        "CONTAINS needs a list field name on its left, or self for tokenized search", at: lhs.start)
                }
            case .tokenMatches:
                guard case .key(.field("allTokens")) = lhs.operand, case .value(.string(let text)) = rhs.operand else {
                    throw failure("TOKENMATCHES is supported only as 'allTokens TOKENMATCHES[cdl] \"words\"'", at: opToken.start)
                }
                return PredicateParser.tokenCondition(TextSearch.tokens(in: text), allTokens: true)
            }
        }

        func distance(
            _ key: QueryKey, _ origin: Location, _ comparison: ComparisonOperator, _ value: FieldValue,
            opToken: Token, valueStart: Int
        ) throws -> Condition {
            guard comparison != .equal && comparison != .notEqual else {
                throw failure("compare a distance with <, <=, > or >=, not \(comparison.rawValue)", at: opToken.start)
            }
            switch value {
            case .double(let km): return .distance(key, from: origin, comparison, kilometers: km)
            case .int64(let km): return .distance(key, from: origin, comparison, kilometers: Double(km))
            default: throw failure("a distance must be compared with a number of kilometres", at: valueStart)
            }
        }

        // MARK: Operands

        mutating func parseOperand() throws -> LocatedOperand {
            let start = token
            let operand: Operand
            switch token.kind {
            case .identifier(let name):
                try advance()
                operand = .key(QueryKey(name))
            case .placeholder(let placeholder):
                // The argument is checked before the next token is read, so its error comes first.
                operand = try argumentOperand(placeholder, at: start)
                try advance()
            case .string(let text):
                try advance()
                operand = .value(.string(text))
            case .integer(let number):
                try advance()
                operand = .value(.int64(number))
            case .double(let number):
                try advance()
                operand = .value(.double(number))
            case .keyword(.trueValue), .keyword(.yes):
                try advance()
                operand = .value(.int64(1))
            case .keyword(.falseValue), .keyword(.no):
                try advance()
                operand = .value(.int64(0))
            case .keyword(.now):
                try advance()
                operand = .value(.date(QueryPredicate.parsingMoment ?? Date()))
            case .keyword(.nilValue), .keyword(.null):
                throw failure(
                    "CloudKit cannot query for nil or NULL; a record without the field matches no comparison", at: start.start)
            case .function(let name):
                try enter(at: start)
                defer { depth -= 1 }
                operand = try parseFunction(name)
            case .distanceFunction:
                try enter(at: start)
                defer { depth -= 1 }
                operand = try parseDistanceFunction()
            case .leftBrace:
                try enter(at: start)
                defer { depth -= 1 }
                operand = .list(try parseSet())
            case .keyword(.selfValue):
                throw failure("self can only be used as 'self CONTAINS \"words\"' (tokenized search)", at: start.start)
            case .keyword(.any), .keyword(.some):
                throw failure("ANY must start the comparison, as in 'ANY tags == \"red\"'", at: start.start)
            case .keyword(.all):
                throw failure("ALL is not supported by CloudKit; only ANY is", at: start.start)
            case .keyword(.first), .keyword(.last), .keyword(.size):
                throw failure("FIRST, LAST and SIZE are not supported by CloudKit; for a field of that name, write #\(text(of: start)) (a # before a word makes it a name)", at: start.start)
            case .keyword(.truepredicate), .keyword(.falsepredicate):
                throw failure("\(describe(start)) is a whole predicate and cannot be compared", at: start.start)
            case .leftParen:
                throw failure("parentheses around a value are not supported", at: start.start)
            case .end:
                throw failure("expected a value after \(describePrevious())", at: start.start)
            default:
                if previous == nil {
                    throw failure("expected a condition but found \(describe(start))", at: start.start)
                }
                throw failure("expected a value or field name after \(describePrevious()) but found \(describe(start))", at: start.start)
            }
            if token.kind == .dot {
                if byteAt(token.end) == UInt8(ascii: "@") {
                    throw failure("aggregate operators such as @count and @sum are not supported by CloudKit", at: token.end)
                }
                if case .key(let name) = operand {
                    throw failure(
                        "key paths into other records or values ('\(name).…') are not supported; CloudKit queries only the record's own fields",
                        at: token.start)
                }
                throw failure("unexpected '.'", at: token.start)
            }
            if token.kind == .leftBracket {
                throw failure("subscripts such as list[0] are not supported by CloudKit", at: token.start)
            }
            return LocatedOperand(operand: operand, start: start.start)
        }

        /// `{a, b, …}`: scalar values only.
        mutating func parseSet() throws -> [FieldValue] {
            try advance()
            var values: [FieldValue] = []
            if token.kind == .rightBrace {
                try advance()
                return values
            }
            while true {
                if token.kind == .leftBrace { throw failure("sets cannot be nested", at: token.start) }
                values.append(try scalar(try parseOperand(), in: "a set"))
                switch token.kind {
                case .comma: try advance()
                case .rightBrace:
                    try advance()
                    return values
                case .end: throw failure("this set is never closed; add a '}'", at: token.start)
                default: throw failure("expected ',' or '}' in the set but found \(describe(token))", at: token.start)
                }
            }
        }

        func scalar(_ operand: LocatedOperand, in context: String) throws -> FieldValue {
            switch operand.operand {
            case .value(let value): return value
            case .key: throw failure("a field name cannot be used inside \(context); only values can", at: operand.start)
            case .list: throw failure("a list cannot be used inside \(context)", at: operand.start)
            case .distance: throw failure("a distance cannot be used inside \(context)", at: operand.start)
            }
        }

        /// Parses `( operand, operand, … )` after a function name.
        mutating func parseCallArguments(of name: String) throws -> [LocatedOperand] {
            try advance()
            guard token.kind == .leftParen else { throw failure("expected '(' after \(name)", at: token.start) }
            try advance()
            var result: [LocatedOperand] = []
            if token.kind == .rightParen {
                try advance()
                return result
            }
            while true {
                result.append(try parseOperand())
                switch token.kind {
                case .comma: try advance()
                case .rightParen:
                    try advance()
                    return result
                case .end: throw failure("the arguments of \(name) are never closed; add a ')'", at: token.start)
                default: throw failure("expected ',' or ')' in \(name)(…) but found \(describe(token))", at: token.start)
                }
            }
        }

        mutating func parseFunction(_ name: String) throws -> Operand {
            let nameStart = token.start
            switch name.lowercased() {
            case "now":
                let args = try parseCallArguments(of: name)
                if let first = args.first { throw failure("now() takes no arguments", at: first.start) }
                return .value(.date(QueryPredicate.parsingMoment ?? Date()))
            case "cast": return .value(try parseCast(nameStart))
            case "reference": return .value(try parseReference(nameStart))
            case "location": return .value(.location(try parseLocation(nameStart)))
            case "bytes":
                let args = try parseCallArguments(of: "BYTES")
                guard args.count == 1, case .value(.string(let base64)) = args[0].operand else {
                    throw failure("BYTES needs one base64 string, as in BYTES(\"AAEC\")", at: nameStart)
                }
                // The record JSON's decoder: padding may be left out, and nothing else is taken
                // (Foundation's took "AAEC=" and "====").
                var text = base64
                guard let data = text.withUTF8({ Base64.decode($0) }) else {
                    throw failure("BYTES needs valid base64", at: args[0].start)
                }
                return .value(.bytes(data))
            case "asset":
                throw failure("assets cannot be compared in a CloudKit query", at: nameStart)
            case "subquery":
                throw failure("SUBQUERY is not supported by CloudKit", at: nameStart)
            case "function":
                throw failure("FUNCTION(…) is not supported by CloudKit", at: nameStart)
            default:
                throw failure(
                    "unknown function '\(name)'; Stratus understands CAST, REFERENCE, LOCATION, BYTES, now() and distanceToLocation:fromLocation:",
                    at: nameStart)
            }
        }

        /// `CAST(seconds since 2001-01-01, "NSDate")`, and `CAST("inf", "NSNumber")` for numbers
        /// that have no literal.
        mutating func parseCast(_ nameStart: Int) throws -> FieldValue {
            let args = try parseCallArguments(of: "CAST")
            guard args.count == 2 else {
                throw failure("CAST needs a value and a type name, as in CAST(700000000, \"NSDate\")", at: nameStart)
            }
            guard case .value(.string(let typeName)) = args[1].operand else {
                throw failure("the second argument of CAST must be a type name such as \"NSDate\"", at: args[1].start)
            }
            let value = try scalar(args[0], in: "CAST")
            switch typeName {
            case "NSDate":
                switch value {
                case .double(let seconds): return .date(Date(timeIntervalSinceReferenceDate: seconds))
                case .int64(let seconds): return .date(Date(timeIntervalSinceReferenceDate: Double(seconds)))
                case .date: return value
                default:
                    throw failure("CAST to NSDate needs a number of seconds since 2001-01-01", at: args[0].start)
                }
            case "NSNumber":
                switch value {
                case .int64, .double: return value
                case .string(let text):
                    if let integer = Int64(text) { return .int64(integer) }
                    if let double = Double(text) { return .double(double) }
                    throw failure("CAST to NSNumber needs a number such as \"12\", \"1.5\" or \"inf\"", at: args[0].start)
                default:
                    throw failure("CAST to NSNumber needs a number or a string holding one", at: args[0].start)
                }
            default:
                throw failure("CAST to \"\(typeName)\" is not supported; use \"NSDate\" or \"NSNumber\"", at: args[1].start)
            }
        }

        /// `REFERENCE("recordName" [, "zoneName" [, "ownerName"]])`, a Stratus extension.
        mutating func parseReference(_ nameStart: Int) throws -> FieldValue {
            let args = try parseCallArguments(of: "REFERENCE")
            guard (1...3).contains(args.count) else {
                throw failure("REFERENCE needs a record name, and optionally a zone name and an owner name", at: nameStart)
            }
            var parts: [String] = []
            for arg in args {
                guard case .value(.string(let text)) = arg.operand else {
                    throw failure("the arguments of REFERENCE must be strings", at: arg.start)
                }
                parts.append(text)
            }
            let zone = RecordZone.ID(
                zoneName: parts.count > 1 ? parts[1] : RecordZone.ID.defaultZoneName,
                ownerName: parts.count > 2 ? parts[2] : RecordZone.ID.currentUserDefaultOwner)
            return .reference(Record.Reference(recordID: Record.ID(recordName: parts[0], zoneID: zone), action: .none))
        }

        /// `LOCATION(latitude, longitude [, altitude, horizontalAccuracy, verticalAccuracy, course,
        /// speed, timestamp])`, a Stratus extension; the timestamp is seconds since 2001-01-01 or a date.
        mutating func parseLocation(_ nameStart: Int) throws -> Location {
            let args = try parseCallArguments(of: "LOCATION")
            guard (2...8).contains(args.count) else {
                throw failure(
                    "LOCATION needs latitude and longitude, then optionally altitude, horizontalAccuracy, verticalAccuracy, course, speed and timestamp",
                    at: nameStart)
            }
            var numbers: [Double] = []
            var timestamp = Date(timeIntervalSinceReferenceDate: 0)
            for (index, arg) in args.enumerated() {
                switch arg.operand {
                case .value(.double(let number)): numbers.append(number)
                case .value(.int64(let number)): numbers.append(Double(number))
                case .value(.date(let date)) where index == 7: timestamp = date
                default: throw failure("the arguments of LOCATION must be numbers", at: arg.start)
                }
            }
            if numbers.count == 8 { timestamp = Date(timeIntervalSinceReferenceDate: numbers[7]) }
            func number(_ index: Int, else fallback: Double) -> Double { numbers.count > index ? numbers[index] : fallback }
            return Location(latitude: numbers[0], longitude: numbers[1], altitude: number(2, else: 0),
                            horizontalAccuracy: number(3, else: 0), verticalAccuracy: number(4, else: -1),
                            course: number(5, else: -1), speed: number(6, else: -1), timestamp: timestamp)
        }

        /// `distanceToLocation:fromLocation:(field, location)`.
        mutating func parseDistanceFunction() throws -> Operand {
            let name = "distanceToLocation:fromLocation:"
            let args = try parseCallArguments(of: name)
            guard args.count == 2 else {
                throw failure("\(name) needs a field and a location, as in \(name)(place, %@)", at: args.first?.start ?? token.start)
            }
            guard case .key(let key) = args[0].operand else {
                throw failure("the first argument of \(name) must be a LOCATION field name", at: args[0].start)
            }
            guard case .value(.location(let origin)) = args[1].operand else {
                throw failure("the second argument of \(name) must be a Location", at: args[1].start)
            }
            return .distance(key, origin)
        }

        /// Raises the nesting depth; `depth` must be lowered by the caller once the nested part is read.
        mutating func enter(at token: Token) throws {
            if depth >= PredicateParser.maximumDepth {
                throw failure("the predicate nests more than \(PredicateParser.maximumDepth) levels deep", at: token.start)
            }
            depth += 1
        }

        // MARK: Arguments

        mutating func argumentOperand(_ placeholder: Placeholder, at placeholderToken: Token) throws -> Operand {
            let spec = text(of: placeholderToken)
            guard argumentIndex < arguments.count else {
                let given =
                    switch arguments.count {
                    case 0: "no arguments were"
                    case 1: "only 1 argument was"
                    default: "only \(arguments.count) arguments were"
                    }
                throw failure("\(spec) needs argument \(argumentIndex + 1) but \(given) given", at: placeholderToken.start)
            }
            let number = argumentIndex + 1
            let raw = arguments[argumentIndex]
            argumentIndex += 1
            let at = placeholderToken.start
            guard let value = unwrapOptional(raw) else {
                throw failure("argument \(number) is nil; CloudKit cannot query for nil", at: at)
            }
            let typeName = String(describing: type(of: value))
            switch placeholder {
            case .key:
                let name: String
                switch value {
                case let text as String: name = text
                case let text as Substring: name = String(text)
                default: throw failure("argument \(number) for %K must be a String naming a field, not a \(typeName)", at: at)
                }
                if name.contains(".") {
                    throw failure(
                        "argument \(number) for %K is the key path '\(name)'; key paths into other records are not supported",
                        at: at)
                }
                guard isIdentifier(name) else {
                    throw failure("argument \(number) for %K, '\(name.prefix(40))', is not a field name", at: at)
                }
                return .key(QueryKey(name))
            case .cString:
                switch value {
                case let text as String: return .value(.string(text))
                case let text as Substring: return .value(.string(String(text)))
                default: throw failure("argument \(number) for %s must be a String, not a \(typeName)", at: at)
                }
            case .integer:
                guard let integer = try integerValue(value, number: number, at: at) else {
                    throw failure("argument \(number) for \(spec) must be an integer, not a \(typeName); use %f or %@", at: at)
                }
                return .value(.int64(integer))
            case .double:
                switch value {
                case let double as Double: return .value(.double(double))
                case let float as Float: return .value(.double(Double(float)))
                case let float as CGFloat: return .value(.double(Double(float)))
                default:
                    if let integer = try integerValue(value, number: number, at: at) { return .value(.double(Double(integer))) }
                    throw failure("argument \(number) for \(spec) must be a number, not a \(typeName)", at: at)
                }
            case .object:
                if let scalar = try scalarValue(value, number: number, at: at) { return .value(scalar) }
                if let fieldValue = value as? FieldValue, let elements = PredicateParser.listElements(of: fieldValue) {
                    if case .assetList = fieldValue {
                        throw failure("argument \(number) is a list of assets; assets cannot be compared in a query", at: at)
                    }
                    return .list(elements.map(PredicateParser.normalized))
                }
                if let (array, unordered) = PredicateParser.collectionElements(of: value) {
                    var elements: [FieldValue] = []
                    elements.reserveCapacity(array.count)
                    for (index, element) in array.enumerated() {
                        guard let unwrapped = unwrapOptional(element) else {
                            throw failure("element \(index) of argument \(number) is nil; CloudKit cannot query for nil", at: at)
                        }
                        guard let scalar = try scalarValue(unwrapped, number: number, at: at) else {
                            throw failure(
                                "element \(index) of argument \(number) is a \(String(describing: type(of: unwrapped))), which cannot be used in a predicate",
                                at: at)
                        }
                        elements.append(scalar)
                    }
                    // A set's order changes from process to process; a predicate's text (and so
                    // a cursor's query fingerprint) must not.
                    if unordered { elements.sort(by: PredicateParser.setOrder) }
                    return .list(elements)
                }
                throw failure(
                    "argument \(number) is a \(typeName), which cannot be used in a predicate; pass a String, Int, Double, "
                        + "Bool, Date, Data, Record.ID, Record.Reference, Record, Location, FieldValue, or an array, a set or a dictionary of these",
                    at: at)
            }
        }

        /// The query value of one argument, or `nil` when it is not a scalar (an array, or a type
        /// predicates cannot use).
        func scalarValue(_ value: Any, number: Int, at offset: Int) throws -> FieldValue? {
            if let integer = try integerValue(value, number: number, at: offset) { return .int64(integer) }
            switch value {
            case let text as String: return .string(text)
            case let text as Substring: return .string(String(text))
            case let double as Double: return .double(double)
            case let float as Float: return .double(Double(float))
            // A map radius or a slider's value, as Apple's CloudKit samples pass them.
            case let float as CGFloat: return .double(Double(float))
            case let date as Date: return .date(date)
            case let data as Data: return .bytes(data)
            case let id as Record.ID: return .reference(Record.Reference(recordID: id, action: .none))
            case let reference as Record.Reference: return PredicateParser.normalized(.reference(reference))
            case let record as Record: return .reference(Record.Reference(recordID: record.recordID, action: .none))
            case let location as Location: return .location(location)
            case is Asset: throw failure("argument \(number) is an Asset; assets cannot be compared in a query", at: offset)
            case let fieldValue as FieldValue:
                if case .asset = fieldValue {
                    throw failure("argument \(number) is an asset; assets cannot be compared in a query", at: offset)
                }
                return PredicateParser.listElements(of: fieldValue) == nil ? PredicateParser.normalized(fieldValue) : nil
            default: return nil
            }
        }

        /// Bool and the fixed-width integer types as an `Int64`, like CloudKit stores them.
        func integerValue(_ value: Any, number: Int, at offset: Int) throws -> Int64? {
            switch value {
            case let bool as Bool: return bool ? 1 : 0
            case let v as Int: return Int64(v)
            case let v as Int64: return v
            case let v as Int32: return Int64(v)
            case let v as Int16: return Int64(v)
            case let v as Int8: return Int64(v)
            case let v as UInt8: return Int64(v)
            case let v as UInt16: return Int64(v)
            case let v as UInt32: return Int64(v)
            case let v as UInt:
                guard let exact = Int64(exactly: v) else {
                    throw failure("argument \(number), \(v), does not fit in a 64-bit signed integer", at: offset)
                }
                return exact
            case let v as UInt64:
                guard let exact = Int64(exactly: v) else {
                    throw failure("argument \(number), \(v), does not fit in a 64-bit signed integer", at: offset)
                }
                return exact
            default: return nil
            }
        }

        func unwrapOptional(_ value: Any) -> Any? {
            let mirror = Mirror(reflecting: value)
            guard mirror.displayStyle == .optional else { return value }
            guard let wrapped = mirror.children.first?.value else { return nil }
            return unwrapOptional(wrapped)
        }

        func isIdentifier(_ name: String) -> Bool {
            let utf8 = Array(name.utf8)
            guard let first = utf8.first, isIdentifierStart(first) else { return false }
            return utf8.allSatisfy(isIdentifierByte)
        }

        // MARK: Lexer

        mutating func advance() throws {
            previous = token
            token = try lex()
        }

        mutating func lex() throws -> Token {
            while position < bytes.count, isSpace(bytes[position]) { position += 1 }
            let start = position
            guard start < bytes.count else { return Token(kind: .end, start: start, end: start) }
            let byte = bytes[start]
            func single(_ kind: Token.Kind, length: Int = 1) -> Token {
                position = start + length
                return Token(kind: kind, start: start, end: position)
            }
            switch byte {
            case _ where isIdentifierStart(byte):
                return try lexWord(from: start, escaped: false)
            case UInt8(ascii: "#"):
                guard start + 1 < bytes.count, isIdentifierStart(bytes[start + 1]) else {
                    throw failure("'#' must be followed by a field name, as in #now", at: start)
                }
                return try lexWord(from: start + 1, escaped: true)
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try lexNumber(from: start)
            case UInt8(ascii: "."):
                if isDigit(at: start + 1) { return try lexNumber(from: start) }
                return single(.dot)
            case UInt8(ascii: "-"):
                if isDigit(at: start + 1) || (byteAt(start + 1) == UInt8(ascii: ".") && isDigit(at: start + 2)) {
                    return try lexNumber(from: start)
                }
                throw failure("arithmetic (+, -, *, /) is not supported by CloudKit", at: start)
            case UInt8(ascii: "+"), UInt8(ascii: "*"), UInt8(ascii: "/"):
                throw failure("arithmetic (+, -, *, /) is not supported by CloudKit", at: start)
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                return try lexString(from: start)
            case UInt8(ascii: "%"):
                return try lexPlaceholder(from: start)
            case UInt8(ascii: "="):
                switch byteAt(start + 1) {
                case UInt8(ascii: "="): return single(.comparison(.equal), length: 2)
                case UInt8(ascii: "<"): return single(.comparison(.lessOrEqual), length: 2)
                case UInt8(ascii: ">"): return single(.comparison(.greaterOrEqual), length: 2)
                default: return single(.comparison(.equal))
                }
            case UInt8(ascii: "<"):
                switch byteAt(start + 1) {
                case UInt8(ascii: "="): return single(.comparison(.lessOrEqual), length: 2)
                case UInt8(ascii: ">"): return single(.comparison(.notEqual), length: 2)
                default: return single(.comparison(.less))
                }
            case UInt8(ascii: ">"):
                if byteAt(start + 1) == UInt8(ascii: "=") { return single(.comparison(.greaterOrEqual), length: 2) }
                return single(.comparison(.greater))
            case UInt8(ascii: "!"):
                if byteAt(start + 1) == UInt8(ascii: "=") { return single(.comparison(.notEqual), length: 2) }
                return single(.bang)
            case UInt8(ascii: "&"):
                if byteAt(start + 1) == UInt8(ascii: "&") { return single(.andSymbol, length: 2) }
                throw failure("unexpected '&'; write AND or &&", at: start)
            case UInt8(ascii: "|"):
                if byteAt(start + 1) == UInt8(ascii: "|") { return single(.orSymbol, length: 2) }
                throw failure("unexpected '|'; CloudKit does not support OR", at: start)
            case UInt8(ascii: "("): return single(.leftParen)
            case UInt8(ascii: ")"): return single(.rightParen)
            case UInt8(ascii: "{"): return single(.leftBrace)
            case UInt8(ascii: "}"): return single(.rightBrace)
            case UInt8(ascii: "["): return single(.leftBracket)
            case UInt8(ascii: "]"): return single(.rightBracket)
            case UInt8(ascii: ","): return single(.comma)
            case UInt8(ascii: "@"):
                throw failure("aggregate operators such as @count and @sum are not supported by CloudKit", at: start)
            case UInt8(ascii: "$"):
                throw failure("variables ($name) are not supported; pass values as %@ arguments", at: start)
            default:
                throw failure("unexpected character '\(characterText(at: start))'", at: start)
            }
        }

        mutating func lexWord(from wordStart: Int, escaped: Bool) throws -> Token {
            let tokenStart = escaped ? wordStart - 1 : wordStart
            var end = wordStart
            while end < bytes.count, isIdentifierByte(bytes[end]) { end += 1 }
            position = end
            let word = String(decoding: bytes[wordStart..<end], as: UTF8.self)
            func token(_ kind: Token.Kind) -> Token { Token(kind: kind, start: tokenStart, end: position) }
            if escaped { return token(.identifier(word)) }
            if word == "distanceToLocation" && starts(with: ":fromLocation:", at: end) {
                position = end + ":fromLocation:".utf8.count
                return token(.distanceFunction)
            }
            let keyword = Keyword(rawValue: word.lowercased())
            if let keyword, keyword.isOperator { return token(.keyword(keyword)) }
            var next = end
            while next < bytes.count, isSpace(bytes[next]) { next += 1 }
            if byteAt(next) == UInt8(ascii: "(") { return token(.function(word)) }
            if let keyword { return token(.keyword(keyword)) }
            return token(.identifier(word))
        }

        mutating func lexNumber(from start: Int) throws -> Token {
            var index = start
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            var isDouble = false
            var radix = 10
            if bytes[index] == UInt8(ascii: "0"), let prefix = byteAt(index + 1),
                let prefixRadix = [UInt8(ascii: "x"): 16, UInt8(ascii: "X"): 16, UInt8(ascii: "o"): 8,
                    UInt8(ascii: "O"): 8, UInt8(ascii: "b"): 2, UInt8(ascii: "B"): 2][prefix]
            {
                radix = prefixRadix
                index += 2
                while index < bytes.count, isHexDigit(bytes[index]) { index += 1 }
            } else {
                while isDigit(at: index) { index += 1 }
                if byteAt(index) == UInt8(ascii: "."), isDigit(at: index + 1) {
                    isDouble = true
                    index += 1
                    while isDigit(at: index) { index += 1 }
                }
                if let e = byteAt(index), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
                    var exponent = index + 1
                    if let sign = byteAt(exponent), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { exponent += 1 }
                    if isDigit(at: exponent) {
                        isDouble = true
                        index = exponent
                        while isDigit(at: index) { index += 1 }
                    }
                }
            }
            if let next = byteAt(index), isIdentifierByte(next) || next == UInt8(ascii: ".") {
                throw failure("malformed number '\(text(from: start, to: index + 1))'", at: start)
            }
            position = index
            let literal = String(decoding: bytes[start..<index], as: UTF8.self)
            if isDouble {
                guard let double = Double(literal) else { throw failure("malformed number '\(literal)'", at: start) }
                // Stores hold finite doubles only, and a number read as 0 that is not 0 would
                // match zeros: both are refused where they are written, as an import refuses them.
                guard double.isFinite else {
                    throw failure("the number \(literal.prefix(40)) is too large for a Double; no stored value compares with it", at: start)
                }
                let mantissa = literal.prefix { $0 != "e" && $0 != "E" }
                guard double != 0 || !mantissa.contains(where: { $0 >= "1" && $0 <= "9" }) else {
                    throw failure("the number \(literal.prefix(40)) is too small for a Double, which would read it as 0", at: start)
                }
                return Token(kind: .double(double), start: start, end: index)
            }
            let negative = bytes[start] == UInt8(ascii: "-")
            let digits = String(decoding: bytes[(radix == 10 ? digitsStart : digitsStart + 2)..<index], as: UTF8.self)
            guard !digits.isEmpty, digits.allSatisfy({ $0.hexDigitValue.map { $0 < radix } ?? false }) else {
                throw failure("malformed number '\(literal)'", at: start)
            }
            guard let integer = Int64((negative ? "-" : "") + digits, radix: radix) else {
                throw failure(
                    "the integer \(literal.prefix(40)) does not fit in 64 bits" + (radix == 10 ? "; write it with a decimal point for a Double" : ""), at: start)
            }
            return Token(kind: .integer(integer), start: start, end: index)
        }

        mutating func lexString(from start: Int) throws -> Token {
            let quote = bytes[start]
            var index = start + 1
            var utf8: [UInt8] = []
            while true {
                guard index < bytes.count else {
                    throw failure("this string is never closed; add a closing \(quote == UInt8(ascii: "'") ? "'" : "\"")", at: start)
                }
                let byte = bytes[index]
                if byte == quote {
                    index += 1
                    break
                }
                guard byte == UInt8(ascii: "\\") else {
                    utf8.append(byte)
                    index += 1
                    continue
                }
                guard let escape = byteAt(index + 1) else {
                    throw failure("this string is never closed; add a closing \(quote == UInt8(ascii: "'") ? "'" : "\"")", at: start)
                }
                switch escape {
                case UInt8(ascii: "\\"), UInt8(ascii: "'"), UInt8(ascii: "\""): utf8.append(escape)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "0"): utf8.append(0x00)
                case UInt8(ascii: "u"):
                    let (scalar, length) = try unicodeEscape(at: index)
                    JSONText.appendUTF8(scalar, to: &utf8)
                    index += length
                    continue
                default:
                    throw failure(
                        "unknown escape '\\\(characterText(at: index + 1))' in a string; write \\\\ for a backslash", at: index)
                }
                index += 2
            }
            position = index
            return Token(kind: .string(String(decoding: utf8, as: UTF8.self)), start: start, end: index)
        }

        /// `\uXXXX`, with UTF-16 surrogate pairs written as two escapes, read as JSON reads
        /// them (``JSONText``); returns the scalar and the bytes read.
        func unicodeEscape(at index: Int) throws -> (Unicode.Scalar, Int) {
            func hex(at offset: Int) throws -> UInt32 {
                guard offset + 4 <= bytes.count, let value = bytes.withUnsafeBufferPointer({ JSONText.hexValue($0.baseAddress! + offset) })
                else { throw failure("expected four hex digits after \\u", at: index) }
                return value
            }
            let first = try hex(at: index + 2)
            if JSONText.isHighSurrogate(first) {
                guard byteAt(index + 6) == UInt8(ascii: "\\"), byteAt(index + 7) == UInt8(ascii: "u") else {
                    throw failure("\\u\(String(first, radix: 16)) starts a UTF-16 surrogate pair but no \\u escape follows", at: index)
                }
                let second = try hex(at: index + 8)
                guard JSONText.isLowSurrogate(second) else {
                    throw failure("\\u\(String(second, radix: 16)) is not the second half of a surrogate pair", at: index + 6)
                }
                guard let scalar = Unicode.Scalar(JSONText.scalarValue(high: first, low: second)) else { throw failure("invalid \\u escape", at: index) }
                return (scalar, 12)
            }
            guard let scalar = Unicode.Scalar(first) else {
                throw failure("\\u\(String(first, radix: 16)) is half of a UTF-16 surrogate pair without its other half", at: index)
            }
            return (scalar, 6)
        }

        mutating func lexPlaceholder(from start: Int) throws -> Token {
            var index = start + 1
            guard let first = byteAt(index) else { throw failure("'%' at the end of the format", at: start) }
            let placeholder: Placeholder
            switch first {
            case UInt8(ascii: "@"): placeholder = .object
            case UInt8(ascii: "K"): placeholder = .key
            case UInt8(ascii: "s"): placeholder = .cString
            case UInt8(ascii: "d"), UInt8(ascii: "i"), UInt8(ascii: "u"): placeholder = .integer
            case UInt8(ascii: "f"): placeholder = .double
            case UInt8(ascii: "%"):
                throw failure("'%%' is a literal percent sign, which means nothing outside a string", at: start)
            case UInt8(ascii: "l"), UInt8(ascii: "h"), UInt8(ascii: "q"), UInt8(ascii: "z"):
                // Length modifiers (%ld, %lld, %hd, %qd, %zd, %lf) change nothing for boxed Swift arguments.
                while let b = byteAt(index), [UInt8(ascii: "l"), UInt8(ascii: "h"), UInt8(ascii: "q"), UInt8(ascii: "z")].contains(b) {
                    index += 1
                }
                switch byteAt(index) {
                case UInt8(ascii: "d"), UInt8(ascii: "i"), UInt8(ascii: "u"): placeholder = .integer
                case UInt8(ascii: "f"): placeholder = .double
                default:
                    throw failure(
                        "unsupported format specifier '\(text(from: start, to: index + 1))'; use %@, %K, %d, %i, %f or %s", at: start)
                }
            default:
                throw failure(
                    "unsupported format specifier '%\(characterText(at: index))'; use %@, %K, %d, %i, %f or %s", at: start)
            }
            position = index + 1
            return Token(kind: .placeholder(placeholder), start: start, end: position)
        }

        // MARK: Bytes

        func byteAt(_ index: Int) -> UInt8? { index < bytes.count ? bytes[index] : nil }

        func isDigit(at index: Int) -> Bool {
            guard let byte = byteAt(index) else { return false }
            return byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
        }

        func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || (byte >= 0x09 && byte <= 0x0D)
        }

        func isIdentifierStart(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || byte == UInt8(ascii: "_")
        }

        func isIdentifierByte(_ byte: UInt8) -> Bool {
            isIdentifierStart(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
        }

        func isHexDigit(_ byte: UInt8) -> Bool {
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
        }

        func starts(with literal: String, at index: Int) -> Bool {
            let utf8 = Array(literal.utf8)
            guard index + utf8.count <= bytes.count else { return false }
            return bytes[index..<index + utf8.count].elementsEqual(utf8)
        }

        // MARK: Messages

        /// The one character starting at `index`, for messages.
        func characterText(at index: Int) -> String {
            guard index < bytes.count else { return "" }
            var end = index + 1
            while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end += 1 }
            let scalarText = String(decoding: bytes[index..<end], as: UTF8.self)
            if let scalar = scalarText.unicodeScalars.first, scalar.properties.generalCategory == .control {
                return "\\u{\(String(scalar.value, radix: 16))}"
            }
            return scalarText
        }

        func text(from start: Int, to end: Int) -> String {
            let clampedEnd = min(end, bytes.count)
            guard start < clampedEnd else { return "" }
            return String(decoding: bytes[start..<clampedEnd], as: UTF8.self)
        }

        func text(of token: Token) -> String { text(from: token.start, to: token.end) }

        func describe(_ token: Token) -> String {
            if token.kind == .end { return "the end of the predicate" }
            let shown = text(of: token)
            return shown.count > 40 ? "'\(shown.prefix(40))…'" : "'\(shown)'"
        }

        /// Whether `token` is `nil` or `NULL`.
        func isNil(_ token: Token) -> Bool {
            switch token.kind {
            case .keyword(.nilValue), .keyword(.null): true
            default: false
            }
        }

        func describePrevious() -> String {
            guard let previous else { return "the start" }
            return describe(previous)
        }

        /// How many terminal columns `character` takes: two for East Asian wide characters and
        /// emoji, else one.
        static func columns(of character: Character) -> Int {
            guard let first = character.unicodeScalars.first else { return 1 }
            if first.properties.isEmojiPresentation || character.unicodeScalars.contains("\u{FE0F}") { return 2 }
            switch first.value {
            case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
                 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
                return 2
            default:
                return 1
            }
        }

        /// An `invalidArguments` error pointing at a byte offset: the message, then the input line
        /// with a caret under the offending column.
        func failure(_ problem: String, at offset: Int) -> StratusError {
            let offset = min(max(offset, 0), bytes.count)
            var lineStart = offset
            while lineStart > 0, bytes[lineStart - 1] != 0x0A { lineStart -= 1 }
            var lineEnd = offset
            while lineEnd < bytes.count, bytes[lineEnd] != 0x0A { lineEnd += 1 }
            var line = 1
            for byte in bytes[0..<lineStart] where byte == 0x0A { line += 1 }
            let before = Array(String(decoding: bytes[lineStart..<offset], as: UTF8.self))
            var after = Array(String(decoding: bytes[offset..<lineEnd], as: UTF8.self))
            if after.last == "\r" { after.removeLast() }
            let column = before.count + 1
            // Long lines are cut to a window around the column so the message stays readable.
            let window = 60
            let shownBefore = before.count > window ? Array("…") + before.suffix(window) : before
            let shownAfter = after.count > window ? after.prefix(window) + Array("…") : after
            // Control characters would break the two-line layout; tabs are kept so the caret lines up.
            let excerpt = (shownBefore + shownAfter).map { character -> Character in
                character != "\t" && character.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
                    ? "·" : character
            }
            // As wide as what a terminal shows above it: two columns for a wide character (CJK,
            // emoji), so that the caret stays under the column it names.
            let caret = shownBefore.map { $0 == "\t" ? "\t" : String(repeating: " ", count: Self.columns(of: $0)) }.joined()
            var error = StratusError(
                .invalidArguments,
                "\(problem) (line \(line), column \(column))\n    \(String(excerpt))\n    \(caret)^")
            error.line = line
            error.column = column
            return error
        }
    }
}

// MARK: - Rules shared with the builder

extension PredicateParser {
    /// Why `NOT` cannot be applied to `predicate`, or `nil` when it can: CloudKit allows NOT only
    /// over one comparison, and not with tokenized search, distance or BETWEEN.
    static func negationProblem(_ predicate: QueryPredicate) -> String? {
        switch predicate {
        case .and: "NOT cannot be applied to an AND (nor to ALL, which is one: every element must match); CloudKit allows NOT only over a single comparison"
        case .not: "NOT cannot be applied to another NOT; remove both"
        case .all, .none: "NOT cannot be applied to TRUEPREDICATE or FALSEPREDICATE; write the other one"
        case .condition(.tokens): "NOT cannot be used with 'self CONTAINS' (tokenized search) in CloudKit"
        case .condition(.distance): "NOT cannot be used with distanceToLocation:fromLocation: in CloudKit"
        case .condition(.between): "NOT cannot be used with BETWEEN in CloudKit"
        case .condition: nil
        }
    }

    /// Joins predicates with AND the one way both the parser and the builder do it, so that both
    /// produce equal values: nested ANDs are flattened, and the `self CONTAINS` conditions that
    /// ask for single words (or already ask for all words) are merged into one all-words
    /// condition at the place of the first. A multi-word `self CONTAINS 'bob smith'` means "any of
    /// these words" and is kept apart, since merging it would change what it matches.
    static func conjunction(_ parts: [QueryPredicate]) -> QueryPredicate {
        var flat: [QueryPredicate] = []
        var pending = parts.reversed() as [QueryPredicate]
        while let part = pending.popLast() {
            if case .and(let inner) = part { pending.append(contentsOf: inner.reversed()) } else { flat.append(part) }
        }
        var mergeable = 0
        for part in flat {
            if case .condition(.tokens(let words, let all)) = part, all || words.count == 1 { mergeable += 1 }
        }
        if mergeable >= 2 {
            var words: [String] = []
            var seen: Set<String> = []
            var merged: [QueryPredicate] = []
            var mergedIndex: Int?
            for part in flat {
                if case .condition(.tokens(let partWords, let all)) = part, all || partWords.count == 1 {
                    for word in partWords where seen.insert(word).inserted { words.append(word) }
                    if mergedIndex == nil {
                        mergedIndex = merged.count
                        merged.append(part)
                    }
                } else {
                    merged.append(part)
                }
            }
            if let mergedIndex { merged[mergedIndex] = .condition(tokenCondition(words, allTokens: true)) }
            flat = merged
        }
        return flat.count == 1 ? flat[0] : .and(flat)
    }

    /// A tokens condition in canonical form: one word never asks for "all" words, so one-word
    /// searches compare equal however they were written.
    static func tokenCondition(_ words: [String], allTokens: Bool) -> Condition {
        .tokens(words, allTokens: allTokens && words.count > 1)
    }

    /// A value as queries compare it: a reference's delete action is not part of what it points
    /// at, so it is always `.none`.
    static func normalized(_ value: FieldValue) -> FieldValue {
        switch value {
        case .reference(let reference): .reference(Record.Reference(recordID: reference.recordID, action: .none))
        case .referenceList(let references):
            .referenceList(references.map { Record.Reference(recordID: $0.recordID, action: .none) })
        default: value
        }
    }

    /// The elements of a list value as scalar values, or `nil` for a scalar.
    static func listElements(of value: FieldValue) -> [FieldValue]? {
        switch value {
        case .stringList(let values): values.map(FieldValue.string)
        case .int64List(let values): values.map(FieldValue.int64)
        case .doubleList(let values): values.map(FieldValue.double)
        case .dateList(let values): values.map(FieldValue.date)
        case .bytesList(let values): values.map(FieldValue.bytes)
        case .referenceList(let values): values.map(FieldValue.reference)
        case .locationList(let values): values.map(FieldValue.location)
        case .assetList(let values): values.map(FieldValue.asset)
        case .string, .int64, .double, .date, .bytes, .reference, .location, .asset: nil
        }
    }
}
