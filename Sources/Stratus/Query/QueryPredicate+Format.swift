import Foundation

extension QueryPredicate {
    /// Parses a CloudKit predicate format string, substituting `%@ %K %d %i %f %s` arguments.
    ///
    /// ```swift
    /// let p = try QueryPredicate(format: "title BEGINSWITH %@ AND priority >= %d", "Buy", 2)
    /// ```
    ///
    /// - Throws: ``StratusError`` (`invalidArguments`) with the line and column of the problem
    ///   and a message that shows the input with a caret under it.
    public init(format: String, _ arguments: any Sendable...) throws {
        try self.init(format: format, argumentArray: arguments)
    }

    /// Parses a format string with its arguments given as an array, as
    /// `NSPredicate(format:argumentArray:)` takes them (`nil` for none). The arguments are read
    /// while parsing and not kept.
    ///
    /// ```swift
    /// let p = try QueryPredicate(format: "color IN %@", argumentArray: [["red", "green"]])
    /// ```
    public init(format: String, argumentArray: [Any]?) throws {
        self = try PredicateParser(format: format, arguments: argumentArray ?? []).parse()
    }
}

extension QueryPredicate {
    /// The moment `now` reads while a predicate is parsed in this task; the clock's time when
    /// `nil`. A job names its predicate with a fixed moment, so that `now` stays a word there.
    @TaskLocal package static var parsingMoment: Date?
}
