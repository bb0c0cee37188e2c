import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy in front of a PostgreSQL server that forwards everything, except that it closes
/// the client's connection instead of passing on the server's answer to the `dropping`-th
/// `COMMIT` of a transaction that copied records in (`COPY records`): the transaction is committed on the server, and the
/// client sees its connection lost while committing, as a network cut or a failover right
/// after a commit does. Clients must not ask for SSL or GSS encryption (`sslmode=disable`,
/// `gssencmode=disable`): the proxy reads the server's messages.
final class CommitAnswerDroppingProxy: @unchecked Sendable {
    // @unchecked: the counter is guarded by `lock`; the sockets belong to their pump threads.
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var commits = 0
    private let dropping: Int
    /// Whether the proxy dropped a commit's answer.
    var dropped: Bool { lock.withLock { commits >= dropping } }

    init(upstreamHost: String, upstreamPort: Int, dropping: Int) throws {
        self.dropping = dropping
        let (listener, port) = try LoopbackListener.open()
        self.listener = listener
        self.port = port
        let upstream = (upstreamHost, upstreamPort)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                let server = Self.connect(to: upstream.0, port: upstream.1)
                guard server >= 0 else { close(client); continue }
                // Either pump shuts both sockets down when its side ends; they are closed once
                // both pumps are done, so that no descriptor is closed while still read.
                let requestsDone = DispatchSemaphore(value: 0)
                let copied = Flag()
                Thread.detachNewThread {
                    Self.pump(from: client, to: server, noting: copied)
                    requestsDone.signal()
                }
                Thread.detachNewThread {
                    self.pumpAnswers(from: server, to: client, copied: copied)
                    requestsDone.wait()
                    close(server)
                    close(client)
                }
            }
        }
    }

    deinit { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }

    private static func connect(to host: String, port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if !connected { close(descriptor); return -1 }
        return descriptor
    }

    /// Whether the client started a `COPY records` since the last commit.
    private final class Flag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        func take() -> Bool { lock.withLock { defer { value = false }; return value } }
    }

    private static func pump(from source: Int32, to destination: Int32, noting copied: Flag) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let copy = Array("COPY records".utf8)
        while case let count = read(source, &buffer, buffer.count), count > 0 {
            if buffer[..<count].firstRange(of: copy) != nil { copied.set() }
            guard writeAll(buffer[..<count], to: destination) else { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
    }

    /// Passes on the server's messages (a type byte and a length), cutting the connection at
    /// the chosen commit's `CommandComplete "COMMIT"`.
    private func pumpAnswers(from server: Int32, to client: Int32, copied: Flag) {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        reading: while case let count = read(server, &buffer, buffer.count), count > 0 {
            pending += buffer[..<count]
            var forward = 0
            while pending.count - forward >= 5 {
                let length = Int(pending[forward + 1]) << 24 | Int(pending[forward + 2]) << 16 | Int(pending[forward + 3]) << 8 | Int(pending[forward + 4])
                guard pending.count - forward >= 1 + length else { break }
                let isCommit = pending[forward] == UInt8(ascii: "C") && pending[(forward + 5)...].starts(with: Array("COMMIT".utf8))
                if isCommit && copied.take() {
                    let drop = lock.withLock { () -> Bool in
                        commits += 1
                        return commits == dropping
                    }
                    if drop {
                        _ = Self.writeAll(pending[..<forward], to: client)
                        break reading
                    }
                }
                forward += 1 + length
            }
            guard Self.writeAll(pending[..<forward], to: client) else { break }
            pending.removeFirst(forward)
        }
        shutdown(server, Int32(SHUT_RDWR))
        shutdown(client, Int32(SHUT_RDWR))
    }

    private static func writeAll(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let written = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }
}
