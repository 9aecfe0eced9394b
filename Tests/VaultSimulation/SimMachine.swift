import Foundation
import VaultCore
import VaultCrypto
import VaultHTTP
import VaultSync

/// One machine of a simulation: its own vault file, its own clock (true
/// time plus a skew), its own random stream, and one process at a time,
/// which reaches the store and the provider only through `SimTransport`.
final class SimMachine: @unchecked Sendable {
    let index: Int
    let name: String
    let world: World
    let store: SimStore
    let provider: SimProvider
    let ledger: Ledger
    let location: VaultLocation
    /// This machine's clock minus true time.
    let skew: Double
    private let monotonicStart: Double
    private let bootID: [UInt8]
    let random: SeededRandom
    /// True once it has a vault (the first machine from the start, the
    /// others after `join`).
    var joined = false
    /// The process running now, if any.
    var actor: Actor?
    /// The vault handles the running process opened (to stop its writes
    /// when it is killed).
    var handles: [Vault] = []
    /// Edits this machine's vault reflects (the simulation's own account,
    /// never read from the vault): its own, and those of every root it merged.
    var known: Set<Int> = []
    /// Cut off from the store.
    var away = false

    static let keyFile: [UInt8] = Array(repeating: 0x5a, count: 32)

    init(
        index: Int, world: World, store: SimStore, provider: SimProvider, ledger: Ledger, directory: String,
        skew: Double, seed: UInt64
    ) throws {
        self.index = index
        name = Step.names[index]
        self.world = world
        self.store = store
        self.provider = provider
        self.ledger = ledger
        self.skew = skew
        location = VaultLocation(directory: directory + "/\(name)/data", configDirectory: directory + "/\(name)/config")
        monotonicStart = Double(1000 * (index + 1))
        bootID = Array("boot-\(name)-\(seed)".utf8)
        random = try SeededRandom(seed: Array("machine \(index) of \(seed)".utf8))
    }

    /// This machine's wall clock.
    var clock: SimClock { SimClock(world: world, skew: skew) }

    /// How this machine's processes wait: a pause parks the process until
    /// the simulated time has moved on (a killed process does not wait).
    var pacing: Pacing {
        Pacing(
            sleep: { [self] seconds in
                guard let actor, !actor.crashed else { return }
                checkNoTransaction("a pause")
                world.park(actor, until: world.now + max(0, seconds))
            },
            // A killed process's deadlines have all passed: it never waits.
            monotonic: { [self] in
                (actor?.crashed == true ? 1e9 : 0) + world.now - 1_900_000_000 + monotonicStart
            },
            boot: { [self] in BootReading(bootID: bootID, seconds: world.now - 1_900_000_000 + monotonicStart) })
    }

    var transport: SimTransport { SimTransport(machine: self) }

    /// A request or a pause while a vault transaction is open would hold
    /// the vault's lock across the network: a finding.
    func checkNoTransaction(_ what: String) {
        if handles.contains(where: { $0.database.isInTransaction }) {
            ledger.violation(
                "\(name): \(what) while a vault transaction was open (\(actor?.label ?? "?"))", kind: "transaction")
        }
    }

    /// Opens this machine's vault for one process, as `vault` does.
    func open() throws -> Vault {
        let vault = try Vault.open(
            at: location, key: .keyfile(try SecureBytes(copying: SimMachine.keyFile)), time: clock)
        prepare(vault)
        handles.append(vault)
        return vault
    }

    private func prepare(_ vault: Vault) {
        vault.pacing = pacing
        vault.syncTrace = { [self] event in
            switch event {
            case .merged(let hash): known.formUnion(store.knowledge[hash] ?? [])
            }
        }
        vault.refreshCoordinator = RecordingCoordinator(
            inner: SyncRefreshCoordinator(transport: transport), machine: self)
    }

    /// Creates the first machine's vault and sets its store.
    func create() throws {
        let vault = try Vault.create(
            at: location, key: .keyfile(try SecureBytes(copying: SimMachine.keyFile)), kdf: .minimum, time: clock)
        prepare(vault)
        try SyncEngine(vault: vault, transport: transport).setRemote(url: SimStore.base, user: nil, password: nil)
        joined = true
    }

    // MARK: Operations

    /// What an operation did: a line for the log, and its error's code.
    struct Result {
        var text: String
        var error: VaultError.Code?
    }

    /// Runs `operation` in the calling process (an actor's thread).
    func perform(_ operation: Operation) -> Result {
        do {
            defer { handles.removeAll() }
            return Result(text: try random.installed { () throws -> String in try run(operation) }, error: nil)
        } catch let error as VaultError {
            let expected: Set<VaultError.Code> = [
                .notFound, .alreadyExists, .transient, .busy, .dead, .refused, .invalidInput,
            ]
            if actor?.crashed != true && !expected.contains(error.code) {
                ledger.violation("\(name) \(operation.text): \(error.code) \(error.reason)", kind: "unexpected error")
            }
            return Result(text: "\(error.code): \(error.reason)", error: error.code)
        } catch {
            if actor?.crashed != true {
                ledger.violation("\(name) \(operation.text): \(error)", kind: "unexpected error")
            }
            return Result(text: "\(error)", error: .internalError)
        }
    }

    private func run(_ operation: Operation) throws -> String {
        if case .join = operation {
            let (vault, _) = try SyncEngine.join(
                at: location, url: SimStore.base, user: nil, password: nil,
                key: .keyfile(try SecureBytes(copying: SimMachine.keyFile)), transport: transport, time: clock,
                pacing: pacing,
                trace: { [self] event in
                    if case .merged(let hash) = event { known.formUnion(store.knowledge[hash] ?? []) }
                })
            _ = vault
            joined = true
            return "joined"
        }
        let vault = try open()
        let names = try vault.list(secrets: false).grants.map(\.name)
        func pick(_ n: Int) throws -> String {
            guard !names.isEmpty else { throw VaultError(.notFound, "no grant to pick") }
            return names[n % names.count]
        }
        switch operation {
        case .importNew(let name):
            let grant = authorize(refreshable: Random.fraction() >= 0.1)
            try vault.save(grant.grant, as: name, mode: .insertOnly)
            try edited(vault, name, groups: .both, name: name, family: grant.family, what: operation.text)
            return "imported \(name)"
        case .replace(let n, let refreshable):
            let name = try pick(n)
            let grant = authorize(refreshable: refreshable)
            let given = try? vault.load(name).refreshToken
            try vault.save(grant.grant, as: name, mode: .replace)
            gaveUp(given)
            try edited(vault, name, groups: .tokens, name: name, family: grant.family, what: "replace \(name)")
            return "replaced \(name)"
        case .rename(let n, let to):
            let name = try pick(n)
            try vault.rename(name, to: to)
            try edited(vault, to, groups: .meta, name: to, family: nil, what: "rename \(name) \(to)")
            return "renamed \(name) to \(to)"
        case .remove(let n):
            let name = try pick(n)
            let id = try recordID(vault, name)
            let refreshToken = try? vault.load(name).refreshToken
            try vault.remove(name)
            gaveUp(refreshToken)
            ledger.edit(
                machine: self, record: id, groups: .both, removed: true, name: name, family: nil,
                what: "remove \(name)")
            return "removed \(name)"
        case .token(let n), .refresh(let n):
            let name = try pick(n)
            let force = operation == .refresh(pick: n)
            let knownBefore = known
            let record = try? recordID(vault, name)
            // What the rule costs (docs/sync.md, "Refresh rights while the
            // store is away"): tokens asked for while the store is away, on
            // the machine that holds the grant and on the others.
            let counted =
                away && !force
                ? ((try? SyncEngine(vault: vault, transport: transport).holdsStandingLease(on: name, request: 0))
                    == true ? "holder" : "others") : nil
            let fresh: FreshGrant
            do {
                fresh = try TokenRefresher(vault: vault, transport: transport).freshGrant(name, forceRefresh: force)
            } catch {
                if let counted { ledger.count("token while the store is away, \(counted): not answered") }
                throw error
            }
            if let counted { ledger.count("token while the store is away, \(counted): answered") }
            let token = fresh.grant.accessToken
            switch provider.standing(ofAccess: token, now: world.now) {
            case .expired(let by):
                ledger.violation(
                    "\(self.name) handed out the access token of '\(name)' \(Step.seconds(by)) s after it expired "
                        + "(\(fresh.refreshed ? "just refreshed" : "not refreshed"))", kind: "expired token")
            case .revoked: ledger.count("revoked token handed out")
            case .valid, .unknown: break
            }
            if fresh.refreshed, let id = record,
                ledger.edits.contains(where: { $0.record == id && $0.removed && !knownBefore.contains($0.id) })
            {
                // A refresh racing an acknowledged removal this machine had
                // not heard of when it began: the removal holds, and the new
                // tokens go with it (docs/sync.md, "Versions and merge").
                ledger.removed(refreshToken: fresh.grant.refreshToken)
            }
            return fresh.refreshed ? "refreshed \(name)" : "fresh \(name)"
        case .resolve(let n, let keepOther):
            let engine = SyncEngine(vault: vault, transport: transport)
            let conflicts = try engine.syncConflicts()
            guard !conflicts.isEmpty else { return "no conflict" }
            let c = conflicts[n % conflicts.count]
            let id = try recordID(vault, c.name)
            try engine.resolveConflict(c.name, keepingSide: keepOther ? c.side : 0)
            let side = keepOther ? c.other : c.current
            if side == nil { ledger.removed(refreshToken: (keepOther ? c.current : c.other)?.refreshToken) }
            // What each side leaves of the metadata: in the simulation, a
            // removal or a name.
            let sides = conflicts.filter { $0.name == c.name }
            let metadata = Set(
                [c.current == nil ? "removed" : "name " + c.name]
                    + sides.map { $0.other == nil ? "removed" : "name " + $0.otherName })
            ledger.edit(
                machine: self, record: id, groups: .both, removed: side == nil,
                name: keepOther ? c.otherName : c.name,
                family: provider.family(of: side?.refreshToken ?? side?.accessToken),
                what: "resolve \(c.name) keep \(keepOther ? "other" : "current")", resolves: true,
                picksMetadata: metadata.count > 1)
            return "resolved \(c.name)"
        case .sync:
            let report = try SyncEngine(vault: vault, transport: transport).sync()
            return "synced: pulled \(report.pulled), pushed \(report.pushed)"
                + (report.conflicts.isEmpty ? "" : ", conflicts \(report.conflicts.joined(separator: " "))")
        case .join:
            return "joined"
        case .passwd:
            // A passphrase travels with the keys a root pins, not with every
            // root: a change replaces only the earlier changes whose
            // passphrases this vault held (a machine can merge a root
            // written after a change on another machine before that
            // machine publishes the new keys).
            let before = Set(try vault.keyslots.passphraseSlots().map { Array($0.suffix(8)).hex })
            let unseen = Set(
                ledger.edits.filter { e in
                    e.record == Ledger.passphrase && known.contains(e.id)
                        && !Set(e.name.split(separator: "+").map(String.init)).isSubset(of: before)
                }.map(\.id))
            // And a change whose passphrase this vault holds was seen, even
            // when no root merged here carried it (a machine that joined
            // with keys published before their root landed).
            let held = Set(
                ledger.edits.filter { e in
                    e.record == Ledger.passphrase
                        && Set(e.name.split(separator: "+").map(String.init)).isSubset(of: before)
                }.map(\.id))
            let secret = try SecureBytes(copying: Array("passphrase \(Random.fraction())".utf8))
            try vault.keyslots.changePassphrase(to: .passphrase(secret), kdf: .minimum)
            let slots = try vault.keyslots.passphraseSlots()
            ledger.edit(
                machine: self, record: Ledger.passphrase, groups: .meta, removed: false,
                name: slots.map { Array($0.suffix(8)).hex }.joined(separator: "+"), family: nil, what: "passwd",
                unseen: unseen, seen: held)
            return "new passphrase"
        }
    }

    /// A new authorization at the provider, as the grant a person imports.
    private func authorize(refreshable: Bool) -> (grant: Grant, family: Int) {
        let rotates = Random.fraction() >= 0.15
        // Mostly short-lived access tokens, so that refreshes are frequent;
        // one in four lasts an hour, as many providers' do, so that standing
        // leases turn quiet (docs/sync.md, "Refresh rights while the store
        // is away").
        let lifetime = Random.fraction() < 0.25 ? 3600 : Double(90 + Int(Random.fraction() * 8) * 30)
        let issued = provider.authorize(now: world.now, rotates: rotates, refreshable: refreshable, lifetime: lifetime)
        let now = clock.now()
        let grant = Grant(
            provider: "sim", accessToken: issued.access, refreshToken: issued.refresh, tokenType: "Bearer",
            expiresAt: now.addingTimeInterval(lifetime),
            providerConfiguration: ProviderConfiguration(
                name: "sim", tokenEndpoint: SimProvider.tokenEndpoint, clientID: "sim-client"),
            createdAt: now)
        return (grant, issued.family)
    }

    /// Notes that a person's removal or new tokens gave up `refreshToken`
    /// with the copy this machine held. When a refresh elsewhere had
    /// already spent it, this copy was behind that refresh, and the edit
    /// holds against it (docs/sync.md, "Versions and merge": a refresh the
    /// removal did not see is no conflict): the family's newest token goes
    /// with it, as when the refresh comes after the edit it never heard of.
    private func gaveUp(_ refreshToken: String?) {
        ledger.removed(refreshToken: refreshToken)
        guard let refreshToken, let family = provider.family(of: refreshToken), !provider.isNewest(refreshToken)
        else { return }
        ledger.removed(refreshToken: provider.newest(of: family))
    }

    private func recordID(_ vault: Vault, _ name: String) throws -> [UInt8] {
        let hash = try vault.keys.nameHash(name)
        guard
            let row = try vault.findRow(nameHash: hash, deleted: false) ?? vault.findRow(nameHash: hash, deleted: true)
        else { throw VaultError(.notFound, "no record named \(name)") }
        return row.id
    }

    private func edited(
        _ vault: Vault, _ name: String, groups: Ledger.Groups, name expected: String, family: Int?, what: String
    ) throws {
        ledger.edit(
            machine: self, record: try recordID(vault, name), groups: groups, removed: false, name: expected,
            family: family, what: what)
    }
}

/// A machine's wall clock: true time plus its skew.
struct SimClock: TimeSource {
    let world: World
    let skew: Double

    func now() -> Date { Date(timeIntervalSince1970: world.now + skew) }
}

/// The refresh coordinator of `vault` with a note of when it let a
/// process refresh without the store.
struct RecordingCoordinator: RefreshCoordinator {
    let inner: SyncRefreshCoordinator
    let machine: SimMachine

    func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant? {
        try inner.refreshElsewhere(need, in: vault)
    }

    func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        let decision = try inner.prepare(need, grant: grant, in: vault)
        if case .proceedAlone = decision { machine.actor?.refreshedAlone = true }
        return decision
    }

    func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool {
        inner.mayStillRefreshAlone(need, grant: grant, in: vault)
    }

    func finish(_ need: RefreshNeed, refused: Bool, alone: Bool, in vault: Vault) -> RefusalVerdict {
        if !refused { machine.actor?.storedAnswer = true }
        return inner.finish(need, refused: refused, alone: alone, in: vault)
    }
}

/// A machine's network: requests reach the simulated store and provider,
/// each a point where other processes may run first, and again before the
/// answer arrives.
struct SimTransport: HTTPTransport {
    let machine: SimMachine

    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let world = machine.world
        guard let actor = machine.actor else { throw HTTPError(.network, "no process") }
        if actor.crashed { throw HTTPError(.network, "the process was killed") }
        machine.checkNoTransaction(request.method + " " + request.url)
        world.park(actor, until: world.now + 0.01)
        if actor.crashed { throw HTTPError(.network, "the process was killed") }
        let sent = world.now
        let response: HTTPResponse
        var latency = 0.01
        if request.url.hasPrefix(SimStore.base) {
            if machine.away {
                // Nothing answers: the connection attempt times out.
                world.trace?(
                    "  \(actor.label): \(request.method) \(request.url.split(separator: "/").last ?? "") -> away")
                if actor.spentRefreshToken { actor.cutOff = true }
                world.park(actor, until: world.now + request.connectTimeout)
                throw HTTPError(.network, "the store cannot be reached")
            }
            latency = max(latency, machine.store.slowNext)
            machine.store.slowNext = 0
            do {
                response = try machine.store.handle(request, from: machine, now: world.now) {
                    world.park(actor, until: world.now + 0.01)
                }
            } catch {
                if actor.spentRefreshToken { actor.cutOff = true }
                throw error
            }
            // A store that fails after a refresh keeps the new tokens from
            // it, as one cut off does.
            if response.status >= 500 && actor.spentRefreshToken { actor.cutOff = true }
        } else if request.url == SimProvider.tokenEndpoint {
            response = machine.provider.handle(request, from: actor, machine: machine.name, now: world.now)
        } else {
            throw HTTPError(.refusedURL, "nothing simulated at \(request.url)")
        }
        if let trace = world.trace {
            var line =
                "  \(actor.label): \(request.method) \(request.url.split(separator: "/").last ?? "") -> \(response.status)"
            if let etag = response.header("etag") { line += " etag \(etag)" }
            if let cond = request.headers.first(where: { $0.name.lowercased().hasPrefix("if-") }) {
                line += " (\(cond.name) \(cond.value))"
            }
            if request.url == SimProvider.tokenEndpoint {
                let form = SimProvider.form(request.body?.unsafeCopyToArray() ?? [])
                let token = form["refresh_token"]
                line +=
                    " presenting refresh \(machine.provider.family(of: token) ?? -1).\(machine.provider.generation(of: token) ?? -1)"
            }
            trace(line)
        }
        if world.now + latency - sent > request.timeout {
            // The answer comes too late: the request times out, though the
            // store may have done what it asked.
            world.park(actor, until: sent + request.timeout)
            throw HTTPError(.network, "the request timed out after \(Int(request.timeout)) s")
        }
        world.park(actor, until: world.now + latency)
        if actor.crashed { throw HTTPError(.network, "the process was killed before the answer arrived") }
        return response
    }
}
