internal import FoundationEssentials
internal import Glibc
import Synchronization
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// Answers one request from the key state: what each operation of the
/// protocol does (docs/agent.md). It knows nothing of sockets, so a test
/// drives it with request bodies; the connection threads share one and it
/// counts the requests under way, which the agent lets finish before it exits.
final class AgentResponder: Sendable {
    let keys: KeyState
    let listener: AgentListener
    private let inFlight = Mutex(0)

    init(keys: KeyState, listener: AgentListener) {
        self.keys = keys
        self.listener = listener
    }

    private var environment: AgentEnvironment { keys.environment }

    /// True while a request is being answered.
    var isBusy: Bool { inFlight.withLock { $0 > 0 } }

    /// Runs `body` (answering a request and sending the answer) counted as
    /// under way, so a stopping agent does not exit between storing what a
    /// refresh brought and telling the client: a client that lost the
    /// answer could not tell whether the refresh happened.
    func serving<R>(_ body: () -> R) -> R {
        inFlight.withLock { $0 += 1 }
        defer { inFlight.withLock { $0 -= 1 } }
        return body()
    }

    /// The response to one request body; never throws, errors are answers.
    func answer(_ body: [UInt8], session: inout VaultSession?) -> MessageWriter {
        inFlight.withLock { $0 += 1 }
        defer { inFlight.withLock { $0 -= 1 } }
        do {
            var request = try AgentRequest(parsing: body)
            defer { request.wipe() }
            return try respond(to: request, session: &session)
        } catch {
            var w = MessageWriter(status: 1)
            w.error(error)
            return w
        }
    }

    /// The answer to a parsed request; `session` is the asking connection's
    /// own connection to the vault, opened when first needed.
    func respond(to request: AgentRequest, session: inout VaultSession?) throws(VaultError) -> MessageWriter {
        var w = MessageWriter(status: 0)
        switch request {
        case .hello(let id):
            let (matches, idle, hard) = keys.status(for: id)
            w.u8(matches ? 1 : 0)
            w.u32(UInt32(getpid()))
            w.u32(idle)
            w.u32(hard)
            return w
        case .load(let id, let raw):
            if let held = keys.heldVaultID {
                guard held == id else {
                    throw VaultError(.alreadyExists, "the agent holds the keys of another vault")
                }
                keys.touch()
                return w
            }
            try keys.unlock(vaultID: id, masterKey: try Secure.copy(raw))
            return w
        case .lock:
            keys.lock("lock requested")
            session = nil
            // An agent that exits when locked stops listening before it
            // answers, so the next command finds no agent rather than one
            // about to close.
            if keys.isStopping { listener.removeSocket() }
            return w
        default:
            break
        }
        // The vault file must still be the one unlocked (not replaced by a
        // new vault at the same path since).
        keys.checkVaultFile()
        var grant: String?
        if case .token(let name, _, _) = request { grant = name }
        guard let current = keys.use(grant: grant) else {
            session = nil
            throw VaultError(.locked, "the agent is locked")
        }
        try respond(to: request, with: current, session: &session, into: &w)
        return w
    }

    /// Writes the answer to an operation that needs the keys.
    private func respond(
        to request: AgentRequest, with current: UnlockedKeys, session: inout VaultSession?, into w: inout MessageWriter
    ) throws(VaultError) {
        let recordKeys = current.keys
        switch request {
        case .token(let name, let minimum, let force):
            let vault = try keys.vault(current, session: &session)
            let fresh = try environment.tokenRefresher(vault).freshGrant(
                name, minimumValidity: TimeInterval(minimum), forceRefresh: force)
            w.string(fresh.grant.accessToken ?? "")
            w.string(fresh.grant.tokenType ?? "Bearer")
            w.u64(UInt64(bitPattern: fresh.grant.expiresAt?.epochSeconds ?? AgentProtocol.noExpiry))
        case .nameHash(let name):
            w.fixed(try recordKeys.nameHash(name))
        case .seal(let raw, let id, let version, let deleted, let hash):
            let plain = try Secure.copy(raw)
            let record = try recordKeys.cipher.seal(
                payload: plain, id: id, version: version, deleted: deleted, nameHash: hash)
            w.bytes(record.nonce)
            w.bytes(record.ciphertext)
        case .open(let rows):
            let scratch = try recordKeys.scratchBuffer(for: rows)
            for row in rows {
                do throws(VaultError) {
                    var bytes = try recordKeys.openChecked(row, scratch: scratch) { plain, _ throws(VaultError) in
                        Array(plain)
                    }
                    w.u8(0)
                    w.bytes(bytes)
                    secureZero(&bytes)
                } catch {
                    w.u8(1)
                    w.error(error)
                }
            }
        case .stateMAC(let body):
            w.bytes(try recordKeys.stateMAC(body))
        case .sync:
            let engine = SyncEngine(
                vault: try keys.vault(current, session: &session), transport: environment.transport)
            w.syncReport(try engine.sync())
        case .conflicts:
            let engine = SyncEngine(
                vault: try keys.vault(current, session: &session), transport: environment.transport)
            w.strings(engine.isConfigured ? try engine.conflictNames() : [])
        case .hello, .load, .lock:
            break
        }
    }
}
