import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on the loopback address that plays the first moves of a PostgreSQL server,
/// for messages of libpq that a real test server does not give.
final class ScriptedPostgresServer: @unchecked Sendable {
    // @unchecked: the descriptor is set once; each accepted socket belongs to its thread.
    enum Answer: Sendable {
        /// `S` to the SSL request, then nothing: enough for libpq to go on to the checks of its
        /// own SSL files, which come before the handshake this server never makes.
        case agreeToSSL
        /// `N` to an SSL request, then this FATAL error (SQLSTATE 28000) to the startup message,
        /// as a server whose pg_hba.conf refuses the login says it.
        case refuseLogin(message: String)
    }

    let port: Int
    private let listener: Int32

    init(_ answer: Answer) throws {
        let (listener, port) = try LoopbackListener.open()
        self.listener = listener
        self.port = port
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread {
                    Self.serve(client, answer)
                    var rest = [UInt8](repeating: 0, count: 512)
                    while rest.withUnsafeMutableBytes({ recv(client, $0.baseAddress!, 512, 0) }) > 0 {}
                    close(client)
                }
            }
        }
    }

    deinit { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }

    private static func serve(_ client: Int32, _ answer: Answer) {
        // Every message a client opens with is its length (4 bytes, itself included), then its body.
        func message() -> [UInt8]? {
            guard let head = receive(client, 4) else { return nil }
            let length = head.reduce(0) { $0 << 8 | Int($1) }
            guard length >= 8, length < 10_000 else { return nil }
            return receive(client, length - 4)
        }
        guard var opening = message() else { return }
        // The SSL request's code, 80877103, where a startup message has its protocol version.
        let sslRequest: [UInt8] = [0x04, 0xD2, 0x16, 0x2F]
        switch answer {
        case .agreeToSSL:
            if Array(opening.prefix(4)) == sslRequest { _ = send(client, "S", 1, Int32(MSG_NOSIGNAL)) }
        case .refuseLogin(let text):
            if Array(opening.prefix(4)) == sslRequest {
                _ = send(client, "N", 1, Int32(MSG_NOSIGNAL))
                guard let startup = message() else { return }
                opening = startup
            }
            var fields: [UInt8] = []
            for (code, value) in [("S", "FATAL"), ("V", "FATAL"), ("C", "28000"), ("M", text)] {
                fields += Array(code.utf8) + Array(value.utf8) + [0]
            }
            fields.append(0)
            let length = UInt32(fields.count + 4)
            let error: [UInt8] = [UInt8(ascii: "E")] + withUnsafeBytes(of: length.bigEndian, Array.init) + fields
            _ = error.withUnsafeBytes { send(client, $0.baseAddress, error.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    private static func receive(_ client: Int32, _ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var received = 0
        while received < count {
            let got = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress! + received, count - received, 0) }
            guard got > 0 else { return nil }
            received += got
        }
        return buffer
    }
}
