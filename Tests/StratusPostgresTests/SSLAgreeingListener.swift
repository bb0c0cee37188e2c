import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on the loopback address that answers each client's SSL request with `S`
/// (yes) and then waits for the client to hang up: enough for libpq to go on to the checks of
/// its own SSL files, which come before the handshake this listener never makes.
final class SSLAgreeingListener: @unchecked Sendable {
    // @unchecked: the descriptor is set once; each accepted socket belongs to its thread.
    let port: Int
    private let listener: Int32

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(listener, pointer, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard listener >= 0, bound else {
            close(listener)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread {
                    // The SSL request is 8 bytes: its length, then the code 80877103.
                    var request = [UInt8](repeating: 0, count: 8)
                    var received = 0
                    while received < 8 {
                        let count = request.withUnsafeMutableBytes { recv(client, $0.baseAddress! + received, 8 - received, 0) }
                        guard count > 0 else { break }
                        received += count
                    }
                    if received == 8 { _ = send(client, "S", 1, Int32(MSG_NOSIGNAL)) }
                    var rest = [UInt8](repeating: 0, count: 512)
                    while rest.withUnsafeMutableBytes({ recv(client, $0.baseAddress!, 512, 0) }) > 0 {}
                    close(client)
                }
            }
        }
    }

    deinit { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }
}
