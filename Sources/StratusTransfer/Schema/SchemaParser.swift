import Stratus

/// A recursive-descent parser for CloudKit's schema language, after the grammar of Apple's
/// "Integrating a Text-Based Schema into Your Workflow":
///
/// ```
/// create-schema: DEFINE SCHEMA [ { create-role | record-type } ";" ] ...
/// create-role:   CREATE ROLE %role-name%
/// record-type:   RECORD TYPE %type-name% ( { %field-name% data-type [ field-options ... ]
///                                          | GRANT { READ | CREATE | WRITE } [, ...] TO %role-name% } [, ...] )
/// field-options: QUERYABLE | SORTABLE | SEARCHABLE
/// data-type:     primitive-type | LIST < primitive-type >
/// primitive-type: ASSET | BYTES | DOUBLE | INT64 | LOCATION | REFERENCE | STRING | TIMESTAMP
///                | ENCRYPTED { BYTES | STRING | DOUBLE | INT64 | LOCATION | TIMESTAMP }
///                | NUMBER [ PREFERRED AS { INT64 | DOUBLE } ]
/// ```
///
/// Keywords are case-insensitive, names case-sensitive. Rules CloudKit enforces are checked as
/// each declaration is read, so that an error points at the word that breaks one.
struct SchemaParser {
    private let source: SchemaSource
    private var lexer: SchemaLexer
    private var token: SchemaToken
    private var schema = ContainerSchema()
    /// Where each created role and declared type was named, for messages about repeats.
    private var rolePositions: [SecurityRole: Int] = [:]
    private var typePositions: [String: Int] = [:]
    /// Roles named by grants, checked against the created roles once the whole file is read
    /// (a role may be created after a type that grants to it).
    private var grantedRoles: [(role: SecurityRole, offset: Int)] = []
    /// How many record types, fields per type and field options a file may declare.
    private let limits: SchemaReader.Limits
    /// The QUERYABLE, SORTABLE and SEARCHABLE options read so far, in every record type.
    private var indexCount = 0
    /// The fields read so far, in every record type, those CloudKit declares itself left out.
    private var fieldCount = 0
    private var grantCount = 0
    /// The record types read so far, `Users` left out.
    private var typeCount = 0
    /// The fields of the record type being read, those CloudKit declares itself left out.
    private var fieldsInType = 0

    init(bytes: [UInt8], limits: SchemaReader.Limits) throws(StratusError) {
        self.limits = limits
        source = SchemaSource(bytes: bytes)
        // UTF-16 without a byte order mark: ASCII characters with a NUL byte beside each.
        if bytes.count >= 4, (bytes[0] == 0) != (bytes[1] == 0), (bytes[2] == 0) != (bytes[3] == 0) {
            let encoding = bytes[0] == 0 ? "UTF-16BE" : "UTF-16LE"
            throw source.error("this file looks like UTF-16 (NUL bytes between its first characters); schema files are UTF-8: convert it, for example with iconv -f \(encoding) -t UTF-8", at: 0)
        }
        lexer = SchemaLexer(source: source)
        token = try lexer.next()
    }

    mutating func parse() throws(StratusError) -> ContainerSchema {
        guard token.isKeyword("DEFINE") else { throw unexpected("DEFINE SCHEMA at the start of the file") }
        try advance()
        try expectKeyword("SCHEMA", after: "DEFINE")
        while token.kind != .end {
            if token.isKeyword("CREATE") {
                try advance()
                try expectKeyword("ROLE", after: "CREATE")
                try parseRole()
                try expectPunctuation(";", "';' after the CREATE ROLE statement")
            } else if token.isKeyword("RECORD") {
                try advance()
                try expectKeyword("TYPE", after: "RECORD")
                try parseRecordType()
                try expectPunctuation(";", "';' after the RECORD TYPE statement")
            } else {
                throw unexpected("CREATE ROLE, RECORD TYPE or the end of the file")
            }
        }
        for (role, offset) in grantedRoles where !role.isSystem && !schema.roles.contains(role) {
            throw source.error("role \(SchemaLanguage.quoted(role.name)) is not created by this schema; add CREATE ROLE \(SchemaLanguage.quoted(role.name)); or grant to \"_world\", \"_icloud\" or \"_creator\"", at: offset)
        }
        do {
            try schema.validate()
        } catch {
            // The checks above cover the model's rules; this guards against one they miss.
            throw source.error((error as? StratusError)?.message ?? "\(error)", at: 0)
        }
        return schema
    }

    // MARK: - Statements

    private mutating func parseRole() throws(StratusError) {
        let start = token.start
        let role = SecurityRole(try expectName("a role name"))
        if role.isSystem {
            throw source.error("role \(SchemaLanguage.quoted(role.name)) is CloudKit's own and always exists; a schema cannot create it", at: start)
        }
        do {
            try role.validate()
        } catch {
            throw source.error(error.message, at: start)
        }
        if let first = rolePositions[role] {
            throw source.error("role \(SchemaLanguage.quoted(role.name)) is created twice (first at \(place(first)))", at: start)
        }
        if rolePositions.count >= limits.roles {
            throw source.error("role \(SchemaLanguage.quoted(role.name)) is one more than the \(limits.roles) roles a schema file may create (Stratus's limit)", at: start)
        }
        rolePositions[role] = start
        schema.roles.insert(role)
    }

    private mutating func parseRecordType() throws(StratusError) {
        let start = token.start
        let name = try expectName("a record type name")
        // CloudKit's own types have dotted names (`"cloudkit.share"`, in the export of every
        // container that shares records); an export must read back.
        if !RecordTypeSchema.isCloudKitRecordType(name) {
            do {
                try Naming.checkIdentifier(name, kind: "record type name")
            } catch {
                throw source.error(error.message, at: start)
            }
        }
        if let first = typePositions[name] {
            throw source.error("record type \(SchemaLanguage.quoted(name)) is declared twice (first at \(place(first)))", at: start)
        }
        // `Users` and the system fields are left out of the counts: every export writes them,
        // declared or not, and an export must read back.
        if name != ContainerSchema.usersRecordType {
            if typeCount >= limits.recordTypes {
                throw source.error("record type \(SchemaLanguage.quoted(name)) is one more than the \(limits.recordTypes) record types a schema file may declare (Stratus's limit)", at: start)
            }
            typeCount += 1
        }
        typePositions[name] = start
        fieldsInType = 0
        // CloudKit: "Unless your schema explicitly grants permissions, a type has no security
        // privileges available in the PUBLIC database."
        var type = RecordTypeSchema(recordType: name, grants: [:])
        var fieldPositions: [String: Int] = [:]
        try expectPunctuation("(", "'(' after the record type name")
        if token.isPunctuation(")") {
            try advance()
        } else {
            while true {
                // What may follow the item, for the message when something else does.
                let following: String
                if token.isKeyword("GRANT") {
                    let role = try parseGrant(into: &type)
                    following = "',' or ')' after the GRANT to \(SchemaLanguage.quoted(role.name))"
                } else {
                    let field = try parseField(into: &type, positions: &fieldPositions)
                    following = "QUERYABLE, SORTABLE, SEARCHABLE, ',' or ')' after field \(SchemaLanguage.quoted(field))"
                }
                if token.isPunctuation(",") {
                    try advance()
                } else if token.isPunctuation(")") {
                    try advance()
                    break
                } else {
                    throw unexpected(following)
                }
            }
        }
        if type.recordType == ContainerSchema.usersRecordType, let roles = type.field(ContainerSchema.usersRolesField.name),
            roles.type != .int64List || roles.isEncrypted || roles.isNumber
        {
            throw source.error("the 'roles' field of Users is CloudKit's: declare it as roles LIST<INT64>", at: fieldPositions[roles.name] ?? start)
        }
        do {
            try type.validate()
        } catch {
            // At the field the rule refuses, when that field alone is refused so (a field of
            // CloudKit's own type declared with another type), else at the type.
            let message = (error as? StratusError)?.message ?? "\(error)"
            let refusedField = type.fields.first { field in
                var alone = RecordTypeSchema(recordType: type.recordType, grants: [:])
                alone.fields = [field]
                do { try alone.validate() } catch { return (error as? StratusError)?.message == message }
                return false
            }
            throw source.error(message, at: refusedField.flatMap { fieldPositions[$0.name] } ?? start)
        }
        schema.recordTypes.append(type)
    }

    // MARK: - Fields

    /// Reads a field declaration; returns its name as written.
    private mutating func parseField(into type: inout RecordTypeSchema, positions: inout [String: Int]) throws(StratusError) -> String {
        let nameStart = token.start
        guard token.kind == .word || token.kind == .quoted else {
            throw unexpected("a field name or GRANT")
        }
        if token.kind == .word, SchemaLanguage.reservedWords.contains(token.upperText) {
            throw source.error("\(token.upperText) is a reserved word; write \"\(token.text)\" to use it as a field name", at: nameStart)
        }
        let written = token.text
        let name: String
        if let system = SystemField(cloudKitName: written) {
            name = system.rawValue
        } else if written.hasPrefix("_"), SecurityRole(written).isSystem {
            // `GRANT READ TO "_world", "_icloud"`: a second role read as the next item.
            throw source.error("\(SchemaLanguage.quoted(written)) is one of CloudKit's roles, not a field name (a GRANT names one role: write GRANT … TO \(SchemaLanguage.quoted(written)) for a second one)", at: nameStart)
        } else if written.hasPrefix("_") {
            let systemNames = SystemField.allCases.map { "\"\($0.cloudKitName)\"" }
            throw source.error("\(SchemaLanguage.quoted(written)) is not a system field a schema can declare; names starting with '_' are CloudKit's, and its system fields are \(systemNames.dropLast().joined(separator: ", ")) and \(systemNames.last!)", at: nameStart)
        } else if RecordTypeSchema.isCloudKitRecordType(type.recordType) && Naming.isSystemIdentifier(written) {
            // The fields of CloudKit's own types (`"cloudkit.title"` of `"cloudkit.share"`).
            name = written
        } else {
            do {
                try Naming.checkFieldKey(written)
            } catch {
                // `recordName QUERYABLE`, as a query's advice once put it: the file's name for it.
                let system = SystemField(rawValue: written == "recordID" ? SystemField.recordName.rawValue : written)
                let hint = system.map { " (the schema language names it \"\($0.cloudKitName)\": write \"\($0.cloudKitName)\" \($0.cloudKitType.rawValue) to declare its indexes)" } ?? ""
                throw source.error(error.message + hint, at: nameStart)
            }
            name = written
        }
        if let first = positions[name] {
            throw source.error("field \(SchemaLanguage.quoted(written)) is declared twice in record type \(SchemaLanguage.quoted(type.recordType)) (first at \(place(first)))", at: nameStart)
        }
        if !ContainerSchema.isDeclaredByCloudKit(name, in: type.recordType) {
            if fieldsInType >= limits.fieldsPerRecordType {
                throw source.error("field \(SchemaLanguage.quoted(written)) is one more than the \(limits.fieldsPerRecordType) fields a record type may declare (Stratus's limit)", at: nameStart)
            }
            if fieldCount >= limits.fields {
                throw source.error("field \(SchemaLanguage.quoted(written)) is one more than the \(limits.fields) fields a schema file may declare in all its record types (Stratus's limit)", at: nameStart)
            }
            fieldsInType += 1
            fieldCount += 1
        }
        positions[name] = nameStart
        try advance()

        let typeStart = token.start
        let declared = try parseType()
        if let system = SystemField(rawValue: name), declared.type != system.cloudKitType || declared.isEncrypted || declared.isNumber {
            throw source.error("the system field \"\(written)\" is \(SchemaLanguage.keyword(system.cloudKitType)); its type cannot change", at: typeStart)
        }
        var indexes: RecordTypeSchema.Indexes = []
        while token.kind == .word, let option = SchemaLanguage.options.first(where: { token.isKeyword($0.name) }) {
            try check(option: option.name, option.indexes, on: declared, field: written, at: token.start)
            if !indexes.contains(option.indexes) {
                // Each option is an index the store builds and keeps up on every write.
                if indexCount >= limits.indexes {
                    throw source.error("this \(option.name) is one more than the \(limits.indexes) QUERYABLE, SORTABLE and SEARCHABLE options a schema file may declare (Stratus's limit)", at: token.start)
                }
                indexCount += 1
            }
            indexes.insert(option.indexes)
            try advance()
        }

        // A system field named without options says nothing CloudKit does not already know
        // (every type has them all), so only its indexes are kept.
        if let system = SystemField(rawValue: name) {
            if !indexes.isEmpty, let declaredType = system.declaredType {
                type.fields.append(RecordTypeSchema.Field(name, type: declaredType, indexes: indexes))
            }
        } else {
            type.fields.append(RecordTypeSchema.Field(name, type: declared.type, indexes: indexes, isEncrypted: declared.isEncrypted, isNumber: declared.isNumber,
                                                     namesPreferredType: declared.namesPreferredType))
        }
        return written
    }

    /// Refuses an option CloudKit refuses for the field's type.
    private func check(option: String, _ index: RecordTypeSchema.Indexes, on declared: DeclaredType, field: String, at offset: Int) throws(StratusError) {
        let shown = SchemaLanguage.quoted(field)
        if let system = SystemField(cloudKitName: field), system.declaredType == nil {
            throw source.error("the system field \"\(field)\" cannot have an index", at: offset)
        }
        if Naming.isSystemIdentifier(field) {
            throw source.error("field \(shown) is one of CloudKit's own (names with '.' are), and takes no index", at: offset)
        }
        if declared.isEncrypted {
            throw source.error("field \(shown) is ENCRYPTED, and CloudKit has no index on encrypted fields, so it cannot be \(option)", at: offset)
        }
        if index == .searchable && declared.type != .string && declared.type != .stringList {
            throw source.error("field \(shown) is \(declared.text); only STRING and LIST<STRING> fields can be SEARCHABLE", at: offset)
        }
        if index == .sortable && declared.type.isList {
            throw source.error("field \(shown) is \(declared.text); a list cannot be SORTABLE", at: offset)
        }
    }

    /// A type as declared: the Stratus type, and the words that qualified it.
    private struct DeclaredType {
        var type: FieldType
        var isEncrypted = false
        var isNumber = false
        /// False for a bare `NUMBER` (see ``RecordTypeSchema/Field/namesPreferredType``).
        var namesPreferredType = true
        /// The type as written, for messages.
        var text: String
    }

    private mutating func parseType() throws(StratusError) -> DeclaredType {
        guard token.isKeyword("LIST") else { return try parsePrimitiveType(inList: false) }
        try advance()
        try expectPunctuation("<", "'<' after LIST")
        var element = try parsePrimitiveType(inList: true)
        try expectPunctuation(">", "'>' after the type of the list's elements")
        element.type = element.type.listType
        element.text = "LIST<\(element.text)>"
        return element
    }

    private mutating func parsePrimitiveType(inList: Bool) throws(StratusError) -> DeclaredType {
        let start = token.start
        guard token.kind == .word else { throw unexpected(inList ? "the type of the list's elements" : "a type after the field name") }
        let keyword = token.upperText
        if let type = SchemaLanguage.scalarTypes[keyword] {
            try advance()
            return DeclaredType(type: type, text: keyword)
        }
        switch keyword {
        case "ENCRYPTED":
            try advance()
            let innerStart = token.start
            if token.isKeyword("LIST") {
                throw source.error(inList ? "a LIST cannot hold a LIST" : "ENCRYPTED goes inside the list: write LIST<ENCRYPTED …>", at: innerStart)
            }
            guard token.kind == .word, let type = SchemaLanguage.scalarTypes[token.upperText] else {
                if token.isKeyword("NUMBER") || token.isKeyword("ENCRYPTED") {
                    throw source.error("\(token.upperText) cannot be ENCRYPTED; expected BYTES, STRING, DOUBLE, INT64, LOCATION or TIMESTAMP", at: innerStart)
                }
                throw unexpected("BYTES, STRING, DOUBLE, INT64, LOCATION or TIMESTAMP after ENCRYPTED")
            }
            guard SchemaLanguage.encryptableTypes.contains(type) else {
                let reason = type == .asset ? "CloudKit encrypts assets already" : "CloudKit keeps references in the clear for its own use"
                throw source.error("\(token.upperText) cannot be ENCRYPTED: \(reason)", at: innerStart)
            }
            try advance()
            return DeclaredType(type: type, isEncrypted: true, text: "ENCRYPTED \(SchemaLanguage.keyword(type))")
        case "NUMBER":
            try advance()
            guard token.isKeyword("PREFERRED") else {
                // A NUMBER with no preferred type takes INT64 and DOUBLE values alike; an
                // untyped number is read as INT64 when it is an integer, else as DOUBLE.
                return DeclaredType(type: .int64, isNumber: true, namesPreferredType: false, text: "NUMBER")
            }
            try advance()
            try expectKeyword("AS", after: "PREFERRED")
            guard token.isKeyword("INT64") || token.isKeyword("DOUBLE") else { throw unexpected("INT64 or DOUBLE after PREFERRED AS") }
            let type: FieldType = token.isKeyword("INT64") ? .int64 : .double
            try advance()
            return DeclaredType(type: type, isNumber: true, text: "NUMBER PREFERRED AS \(SchemaLanguage.keyword(type))")
        case "LIST" where inList:
            throw source.error("a LIST cannot hold a LIST", at: start)
        default:
            throw source.error("unknown type \(describe(token)); expected STRING, INT64, DOUBLE, TIMESTAMP, BYTES, REFERENCE, ASSET, LOCATION, LIST<…>, ENCRYPTED … or NUMBER [PREFERRED AS …]", at: start)
        }
    }

    // MARK: - Grants

    /// Reads a GRANT clause; returns the role it grants to.
    private mutating func parseGrant(into type: inout RecordTypeSchema) throws(StratusError) -> SecurityRole {
        let written = token.text  // `Grant`, `GRANT`…: the name a quoted field would keep
        try advance()
        var permissions: RecordPermissions = []
        while true {
            guard token.kind == .word, let named = RecordPermissions.named.first(where: { token.isKeyword($0.name) }) else {
                if permissions.isEmpty, token.kind == .word,
                   SchemaLanguage.scalarTypes[token.upperText] != nil || ["LIST", "ENCRYPTED", "NUMBER"].contains(token.upperText) {
                    // `grant STRING`: a field named grant, which the file must quote.
                    throw source.error("expected READ, CREATE or WRITE after GRANT, found \(describe(token)); GRANT is a reserved word: write \"\(written)\" to use it as a field name", at: token.start)
                }
                throw unexpected(permissions.isEmpty ? "READ, CREATE or WRITE after GRANT" : "READ, CREATE or WRITE after ','")
            }
            permissions.insert(named.permission)
            try advance()
            if token.isPunctuation(",") {
                try advance()
            } else {
                break
            }
        }
        guard token.isKeyword("TO") else { throw unexpected("',' or TO after the permissions of GRANT") }
        try advance()
        let start = token.start
        let role = SecurityRole(try expectName("a role name after TO"))
        if role.name.hasPrefix("_") && !role.isSystem {
            throw source.error("\(SchemaLanguage.quoted(role.name)) is not one of CloudKit's roles \"_world\", \"_icloud\" and \"_creator\"", at: start)
        }
        grantedRoles.append((role, start))
        if type.grants[role] == nil {
            if grantCount >= limits.grants {
                throw source.error("this GRANT is one more than the \(limits.grants) grants (a role's permissions on a record type) a schema file may declare (Stratus's limit)", at: start)
            }
            grantCount += 1
        }
        type.grant(permissions, to: role)
        return role
    }

    // MARK: - Tokens

    private mutating func advance() throws(StratusError) {
        token = try lexer.next()
    }

    private mutating func expectKeyword(_ keyword: String, after previous: String) throws(StratusError) {
        guard token.isKeyword(keyword) else { throw unexpected("\(keyword) after \(previous)") }
        try advance()
    }

    private mutating func expectPunctuation(_ character: Unicode.Scalar, _ expected: String) throws(StratusError) {
        guard token.isPunctuation(character) else { throw unexpected(expected) }
        try advance()
    }

    /// A name: a quoted name, or a word that is not a reserved word.
    private mutating func expectName(_ expected: String) throws(StratusError) -> String {
        if token.kind == .word, SchemaLanguage.reservedWords.contains(token.upperText) {
            throw source.error("\(token.upperText) is a reserved word; write \"\(token.text)\" to use it as a name", at: token.start)
        }
        guard token.kind == .word || token.kind == .quoted else { throw unexpected(expected) }
        let name = token.text
        try advance()
        return name
    }

    private func unexpected(_ expected: String) -> StratusError {
        source.error("expected \(expected), found \(describe(token))", at: token.start)
    }

    private func describe(_ token: SchemaToken) -> String {
        let shown: String
        switch token.kind {
        case .end: return "the end of the file"
        case .quoted: shown = "\"\(token.text)\""
        case .word, .punctuation: shown = token.text
        }
        return shown.count > 40 ? "'\(shown.prefix(40))…'" : "'\(shown)'"
    }

    private func place(_ offset: Int) -> String {
        let (line, column) = source.position(of: offset)
        return "\(line):\(column)"
    }
}
