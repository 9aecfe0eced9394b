import Foundation
import Testing
import VaultHTTP

@Suite("the loopback redirect listener")
struct LoopbackListenerTests {
    /// Sends GETs from another thread while the listener waits.
    static func visit(_ urls: [String]) -> [Int] {
        nonisolated(unsafe) var statuses: [Int] = []
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            for url in urls {
                let status = (try? CurlTransport().send(HTTPRequest(method: "GET", url: url)))?.status ?? -1
                statuses.append(status)
            }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 30)
        return statuses
    }

    @Test("other paths get 404; the exact path returns its parameters and a closing page")
    func redirect() throws {
        let listener = try LoopbackListener()
        #expect(listener.port > 0)
        #expect(listener.redirectURI == "http://127.0.0.1:\(listener.port)/callback")
        let base = "http://127.0.0.1:\(listener.port)"
        nonisolated(unsafe) var statuses: [Int] = []
        Thread.detachNewThread {
            statuses = Self.visit([base + "/favicon.ico", base + "/callback?code=a%2Fb+c&state=xyz&empty="])
        }
        let params = try listener.waitForRedirect(timeout: 20)
        #expect(params.map(\.0) == ["code", "state", "empty"])
        #expect(params.map(\.1) == ["a/b c", "xyz", ""])
        Thread.sleep(forTimeInterval: 0.3)
        #expect(statuses == [404, 200])
    }

    @Test("nobody coming back is a timeout, not a hang")
    func timeout() throws {
        let listener = try LoopbackListener()
        let started = Date()
        #expect { try listener.waitForRedirect(timeout: 0.3) } throws: {
            ($0 as? HTTPError)?.reason.contains("timed out") == true
        }
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test("a fixed port can be used, and a port in use is reported")
    func fixedPort() throws {
        // The freed port may be taken by another test's server in between
        // (they bind free ports too): then try with another one.
        for attempt in 1...5 {
            let first = try LoopbackListener()
            #expect { try LoopbackListener(port: first.port) } throws: { ($0 as? HTTPError)?.code == .unavailable }
            let port = first.port
            _ = consume first
            do {
                let again = try LoopbackListener(port: port, path: "/cb")
                #expect(again.redirectURI == "http://127.0.0.1:\(port)/cb")
                return
            } catch {
                if attempt == 5 { throw error }
            }
        }
    }

    @Test("a garbage request is refused and the listener keeps waiting")
    func garbage() throws {
        let listener = try LoopbackListener()
        let port = listener.port
        Thread.detachNewThread {
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            _ = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            let junk = Array("POST /callback?code=x HTTP/1.1\r\n\r\n".utf8)
            _ = junk.withUnsafeBytes { write(s, $0.baseAddress, $0.count) }
            Thread.sleep(forTimeInterval: 0.2)
            close(s)
            _ = Self.visit(["http://127.0.0.1:\(port)/callback?code=good"])
        }
        let params = try listener.waitForRedirect(timeout: 20)
        #expect(params.first?.1 == "good")
    }
}
