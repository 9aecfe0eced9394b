import Foundation
import Synchronization
import Testing
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// The device flow's handling of what the provider says: its polling
/// numbers and its addresses are untrusted.
@Suite("device flow: the provider's numbers and addresses")
struct DeviceFlowTests {
    /// A clock that moves only when the flow sleeps, recording each sleep.
    final class SleepClock: TimeSource {
        private struct State {
            var current = Date(timeIntervalSince1970: 1_700_000_000)
            var sleeps: [Double] = []
        }
        private let state = Mutex(State())
        var sleeps: [Double] { state.withLock { $0.sleeps } }
        func now() -> Date { state.withLock { $0.current } }
        func sleep(_ seconds: Double) {
            state.withLock {
                $0.sleeps.append(seconds)
                $0.current = $0.current.addingTimeInterval(seconds)
            }
        }
    }

    final class RecordingUI: AuthorizationUI {
        var shown: [String] = []
        var opened: [String] = []
        func openBrowser(_ url: String) { opened.append(url) }
        func show(_ message: String) { shown.append(message) }
        func readPasted(prompt: String) throws(VaultError) -> String { "" }
    }

    func provider() throws -> Provider {
        let json = """
            {"name": "dev", "token_endpoint": "https://id.example/token",
             "device_authorization_endpoint": "https://id.example/device", "client_id": "c",
             "scopes": ["read"], "flows": ["device"]}
            """
        return try Provider(file: ProviderFile.parse(Array(json.utf8), source: "test"), source: "test")
    }

    func run(_ deviceAnswer: String, timeout: Double, pending: Int = 50) throws -> (
        Result<Grant, VaultError>, SleepClock, RecordingUI
    ) {
        let clock = SleepClock()
        let ui = RecordingUI()
        let answers: [(Int, String, [(String, String)])] =
            [(200, deviceAnswer, [])]
            + Array(repeating: (400, #"{"error":"authorization_pending"}"#, []), count: pending)
        let authorizer = Authorizer(
            transport: FakeTransport(answers), ui: ui, time: clock, sleep: { clock.sleep($0) })
        let request = AuthorizationRequest(provider: try provider(), flow: .device, timeout: timeout)
        let result = Result { () throws(VaultError) in try authorizer.authorize(request) }
        return (result, clock, ui)
    }

    @Test("an interval longer than --timeout never outlasts it", arguments: [30.0, 600.0])
    func intervalBoundedByTimeout(interval: Double) throws {
        let (result, clock, _) = try run(
            #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":\#(interval)}"#,
            timeout: 2)
        guard case .failure(let error) = result else { Issue.record("the flow succeeded"); return }
        #expect(error.code == .timedOut)
        #expect(clock.sleeps.reduce(0, +) <= 2)
    }

    @Test(
        "absurd polling numbers are refused, never slept on or trapped on",
        arguments: ["86400", "1e19", "-5", "1e308"])
    func absurdIntervals(interval: String) throws {
        let (result, clock, ui) = try run(
            #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":\#(interval)}"#,
            timeout: 2)
        guard case .failure(let error) = result else { Issue.record("the flow succeeded"); return }
        #expect(error.code == .badResponse, "\(error.reason)")
        #expect(clock.sleeps.isEmpty && ui.shown.isEmpty)
    }

    @Test(
        "a verification address that is not https is refused",
        arguments: ["javascript:alert(1)", "file:///etc/passwd", "http://evil.example/go"])
    func verificationScheme(address: String) throws {
        let (result, _, ui) = try run(
            #"{"device_code":"d","user_code":"U","verification_uri":"\#(address)","interval":1}"#, timeout: 2)
        guard case .failure(let error) = result else { Issue.record("the flow succeeded"); return }
        #expect(error.code == .badResponse)
        #expect(!ui.shown.joined().contains(address))
    }

    @Test("a complete address that is not https is left out; each line is shown on its own")
    func completeAddressDropped() throws {
        let (_, _, ui) = try run(
            #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","#
                + #""verification_uri_complete":"javascript:alert(1)","interval":1}"#, timeout: 2)
        #expect(ui.shown == ["to authorize, open https://id.example/go and enter the code U"])
    }

    @Test(
        "the wait ended by the caller's time limit says so, with the code's lifetime; the provider's expiry says expired"
    )
    func endOfWait() throws {
        let answer = #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":1"#
        // The caller's limit first: the code was still valid.
        let (waited, _, _) = try run(answer + #","expires_in":900}"#, timeout: 3)
        guard case .failure(let error) = waited else { Issue.record("the flow succeeded"); return }
        #expect(error.code == .timedOut)
        #expect(
            error.reason
                == "stopped waiting for the approval after 3 seconds, the time allowed; the code had not expired")
        #expect(error.remedy == .waitLongerForDevice(codeLifetime: 900))
        // The provider's lifetime first: the code expired.
        let (lapsed, _, _) = try run(answer + #","expires_in":3}"#, timeout: 600)
        guard case .failure(let expired) = lapsed else { Issue.record("the flow succeeded"); return }
        #expect(expired.reason == "the device code expired before it was approved")
        #expect(expired.remedy == .restartDeviceAuthorization)
        // The provider saying so (expired_token) within the limit.
        let clock = SleepClock()
        let authorizer = Authorizer(
            transport: FakeTransport([
                (200, answer + #","expires_in":900}"#, []), (400, #"{"error":"expired_token"}"#, []),
            ]), ui: RecordingUI(), time: clock, sleep: { clock.sleep($0) })
        let request = AuthorizationRequest(provider: try provider(), flow: .device, timeout: 600)
        let said = Result { () throws(VaultError) in try authorizer.authorize(request) }
        guard case .failure(let told) = said else { Issue.record("the flow succeeded"); return }
        #expect(told.reason == "the device code expired before it was approved")
    }
}
