import Foundation
@_spi(StratusEngine) import Stratus

/// How one SQL engine writes the expressions of Stratus's queries: where a field's type tag and
/// value are in its stored document, how values bind, and its spelling of a few clauses.
///
/// ``SQLQueryTranslation`` builds the statements (conditions, orders, keysets) once for every
/// SQL engine; a dialect only spells them, so that engines translate Stratus's rules
/// (``Stratus/QueryRules``) the same way. Field names reach a dialect only after ``Naming``
/// checked them; every value is a bound parameter (`?`).
///
/// ```swift
/// let plan = try SQLQueryTranslation(query: compiled, schema: schema, dialect: SQLiteDialect()).select(zoneRow: 7, after: nil, limit: 101)
/// ```
package protocol SQLDialect: Sendable {
    /// The record columns every row statement selects first, in the order the engine decodes
    /// them, and how many there are.
    var recordColumns: String { get }
    var recordColumnCount: Int { get }

    /// The literals of truth.
    var trueLiteral: String { get }
    var falseLiteral: String { get }

    /// A field's type tag (`'S'`, `'I'`, `'SL'`, … as text; NULL when the record lacks it).
    func tag(_ name: String) -> String
    /// A field's scalar value as values of `family` compare in this engine.
    func value(_ name: String, family: QueryRules.OrderedFamily) -> String
    /// What string equality compares: the stored folded copy (``Stratus/FieldDocument``) where
    /// there is one, else the value with A–Z lowercased.
    func equalityValue(_ name: String) -> String
    /// ``equalityValue(_:)`` for a field no index serves, as the engine reads it fastest, and
    /// NULL unless the field holds a string (so that it needs no type guard); `nil` when the
    /// engine has no such form.
    func scanEqualityValue(_ name: String) -> String?
    /// The column a system key compares and sorts by.
    func systemColumn(_ key: QueryKey) -> String
    /// A compared value (of the family the condition was checked against) as a parameter.
    func parameter(_ value: FieldValue) -> SQLValue
    /// Text compared with stored strings (an equality key, a prefix) as a parameter.
    func textParameter(_ text: String) -> SQLValue

    /// Holds when the list field `name` has an element for which `test` holds; `test` receives
    /// the SQL that stands for one element (compared as `family` compares).
    func anyElement(of name: String, family: QueryRules.OrderedFamily, _ test: (String) -> SQLFragment) -> SQLFragment
    /// Holds when `column` starts with the text bound to the fragment's parameters.
    func startsWith(_ column: String, _ prefix: String) -> SQLFragment
    /// Great-circle kilometres from `origin` to the LOCATION field `name` (haversine on a
    /// sphere 12,742.0176 km across, as ``Stratus/QueryRules`` and the oracle compute it).
    func distanceKilometres(_ name: String, from origin: Location) -> SQLFragment
    /// `self CONTAINS` without a word index: a test on the document, or `nil` when the engine
    /// filters those rows itself after reading them.
    func wordsWithoutIndex(_ words: [String], all: Bool) -> SQLFragment?

    /// The expressions a sort on a field without a declared type orders by, ascending in
    /// Stratus's order (family rank, then value, in one expression or several; NULL where the
    /// value has no order), and the
    /// parameters a position's value takes in their place.
    func undeclaredSortColumns(_ name: String) -> [String]
    func undeclaredSortValues(_ value: FieldValue?) -> [SQLValue]
    /// A sort value of a declared family or a system key as a parameter.
    func sortParameter(_ value: FieldValue?) -> SQLValue

    /// `expression` in an ORDER BY, missing values (NULL) first ascending and last descending.
    func orderTerm(_ expression: String, ascending: Bool) -> String
    /// The record name (never missing) in an ORDER BY when it is the query's only order and no
    /// index of the type serves the query: what the zone's primary key keeps in order.
    /// ``orderTerm(_:ascending:)`` unless the engine's key spells the order otherwise.
    func primaryKeyOrderTerm(_ expression: String, ascending: Bool) -> String
    /// The zone's rows: through the indexes, or in the table's storage order when nothing an
    /// index serves restricts or orders them.
    func zoneRows(_ zoneRow: Int64, inStorageOrder: Bool) -> SQLFragment
    /// The record-name tiebreak's expression (an engine may hide it from its planner).
    func tiebreak(hasIndexedIn: Bool) -> String
    /// The end of a row statement: `LIMIT n`, nothing for -1.
    func limitClause(_ limit: Int) -> String

    /// The leading part of a string key expression that the engine's indexes hold, for an
    /// engine whose index entries cannot hold a whole string (PostgreSQL's btree refuses an
    /// entry over 2,704 bytes); `nil` when indexes hold whole strings. The part must keep the
    /// order: when prefix(a) < prefix(b), a < b. ``SQLDialect/indexKeys(for:)`` indexes it, and
    /// ``SQLQueryTranslation`` adds the condition and order on it that the exact ones imply,
    /// so that the index still serves them.
    func indexPrefix(_ expression: String) -> String?
    /// The leading part ``indexPrefix(_:)`` keeps, of a text parameter compared with the key.
    func indexPrefix(of parameter: SQLValue) -> SQLValue
    /// A searched word as the word index (`record_tokens`) holds it; when it is not the word,
    /// the rows found are checked for the whole word afterwards.
    func wordKey(_ word: String) -> String
}

extension SQLDialect {
    package func primaryKeyOrderTerm(_ expression: String, ascending: Bool) -> String { orderTerm(expression, ascending: ascending) }
    package func scanEqualityValue(_ name: String) -> String? { nil }
    package func indexPrefix(_ expression: String) -> String? { nil }
    package func indexPrefix(of parameter: SQLValue) -> SQLValue { parameter }
    package func wordKey(_ word: String) -> String { word }

    /// The value of a field the schema declares of a type of `family`, NULL where the record
    /// holds a value of another type (left from before the declaration): such a value sorts as
    /// missing, and indexes of declared fields hold this expression, so that one order serves
    /// the sort, its keyset and the index (``Stratus/QueryRules/sortValue(of:for:declaredIn:)``).
    package func declaredValue(_ name: String, family: QueryRules.OrderedFamily) -> String {
        "(CASE WHEN \(tag(name)) IN (\(family.scalarTags)) THEN \(value(name, family: family)) END)"
    }

    /// Whether a longer word that starts with `word` could be held in the word index as `word`
    /// itself: `word` and one more character (up to 4 bytes) would be cut. Rows found by such
    /// a key are checked for the whole word too, as for a word that was cut.
    package func wordKeyMayStandForLongerWords(_ word: String) -> Bool {
        let longer = word + "\u{10FFFF}"
        return wordKey(longer) != longer
    }
}

extension QueryRules.OrderedFamily {
    /// The type tags of scalar values of the family, as an SQL list.
    package var scalarTags: String {
        switch self {
        case .number: "'I', 'F'"
        case .timestamp: "'D'"
        case .string: "'S'"
        case .reference: "'R'"
        }
    }

    /// The type tags of list values of the family, as an SQL list.
    package var listTags: String {
        switch self {
        case .number: "'IL', 'FL'"
        case .timestamp: "'DL'"
        case .string: "'SL'"
        case .reference: "'RL'"
        }
    }

    /// The family a declared field type orders in, if its values have an order.
    package init?(declared type: FieldType) {
        guard let family = QueryRules.declaredFamily(of: type) else { return nil }
        self = family
    }
}

extension ComparisonOperator {
    package var sqlOperator: String {
        switch self {
        case .equal: "="
        case .notEqual: "!="
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        }
    }
}
