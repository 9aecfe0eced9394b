import Foundation
import VaultCore
import VaultCrypto
import VaultSync

/// One schedule of three machines syncing through a faulty store and
/// refreshing at a strict provider, played against the real sync engine,
/// refresh coordination and vault files, on a simulated clock: the
/// deterministic simulation of docs/sync.md ("Simulation").
///
/// `Simulation.run(seed:)` makes a schedule from a seed as it plays it;
/// `Simulation.play(_:)` plays a given one (a regression, or a shrunk
/// one). Either ends with the same healing (faults stop, every process
/// finishes, every machine syncs twice) and checks the invariants:
/// machines converge; every acknowledged edit is in the value or kept as a
/// conflict side everywhere, and edits of different groups raise no
/// conflict; no spent refresh token is presented again unless the store
/// was away or a process was killed holding the answer (those are counted
/// apart); every live token family is held at its newest refresh token;
/// no token handed out had expired; nothing fails as damaged or tampered.
public final class Simulation {
    /// What a played schedule found.
    public struct Outcome: Sendable {
        /// The seed the schedule was made from (or names, when given).
        public let seed: UInt64
        /// The schedule as played (made from the seed, or as given).
        public let schedule: String
        /// Broken invariants, `kind: detail`; empty when the schedule passed.
        public let violations: [String]
        /// The kinds of the broken invariants.
        public let kinds: [String]
        /// What each step and each process did.
        public let log: [String]
        /// Operations started, faults ordered, processes killed, and what
        /// the provider saw.
        public let counts: [String: Int]
        public var passed: Bool { violations.isEmpty }
    }

    static let machineCount = 3
    static let operationsPerSchedule = 28

    private let schedule: Schedule
    private let generating: Bool
    private let numbers: SeededNumbers
    private let world = World(start: 1_900_000_000)
    private let store = SimStore()
    private let provider = SimProvider()
    private let ledger = Ledger()
    private var machines: [SimMachine] = []
    private var log: [String] = []
    private var played: [Step] = []
    private let directory: String

    private init(schedule: Schedule, generating: Bool) throws {
        self.schedule = schedule
        self.generating = generating
        numbers = try SeededNumbers(seed: schedule.seed)
        directory = Simulation.scratch() + "/sim-\(getpid())-\(UUID().uuidString.prefix(8))"
        if ProcessInfo.processInfo.environment["VAULT_SIM_TRACE"] == "1" {
            world.trace = { [log = LogBox(self)] in log.append($0) }
        }
        store.honoursPreconditions = schedule.setting.honoursPreconditions
        store.checksBeforeWriting = schedule.setting.checksBeforeWriting
        for (i, skew) in schedule.setting.skews.enumerated() {
            machines.append(
                try SimMachine(
                    index: i, world: world, store: store, provider: provider, ledger: ledger, directory: directory,
                    skew: skew, seed: schedule.seed))
        }
    }

    /// Where schedules keep their vault files: memory when it can.
    static func scratch() -> String {
        FileManager.default.isWritableFile(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    }

    /// Plays the schedule that `seed` makes.
    public static func run(seed: UInt64) throws -> Outcome {
        let numbers = try SeededNumbers(seed: seed ^ 0x5EED)
        func skew() -> Double {
            switch numbers.below(10) {
            case 0..<4: 0
            case 4..<7: numbers.double(5...180)
            default: -numbers.double(5...180)
            }
        }
        let strict = numbers.below(100) < 85
        let setting = Setting(
            skews: [0] + (1..<machineCount).map { _ in (skew() * 10).rounded() / 10 }, honoursPreconditions: strict,
            checksBeforeWriting: strict && numbers.chance(50))
        return try Simulation(schedule: Schedule(seed: seed, setting: setting, steps: []), generating: true).play()
    }

    /// Plays `schedule` as it is.
    public static func play(_ schedule: String) throws -> Outcome {
        guard let parsed = Schedule(text: schedule) else { throw SimulationError("not a schedule") }
        return try Simulation(schedule: parsed, generating: false).play()
    }

    /// Plays `schedule` and leaves out steps while it keeps failing with
    /// the same kind of violation (or, with `counted`, while it still
    /// counts that event, a loss the invariants allow): the shortest such
    /// schedule found. Whole operations go first (a start and the runs of
    /// that process), then runs of consecutive steps, halving, then single
    /// steps; at most `budget` plays.
    public static func shrink(_ outcome: Outcome, budget: Int = 3000, counted: String? = nil) throws -> Outcome {
        func kept(_ result: Outcome) -> Bool {
            if let counted { return result.counts[counted, default: 0] > 0 }
            return outcome.kinds.first.map(result.kinds.contains) ?? false
        }
        guard var best = Schedule(text: outcome.schedule), kept(outcome) else { return outcome }
        var bestOutcome = outcome
        var plays = 0
        func fails(_ trial: Schedule) throws -> Bool {
            guard plays < budget else { return false }
            plays += 1
            let result = try Simulation(schedule: trial, generating: false).play()
            guard kept(result) else { return false }
            best = trial
            bestOutcome = result
            return true
        }
        var progress = true
        while progress && plays < budget {
            progress = false
            // Whole operations, the last first.
            var i = best.steps.count - 1
            while i >= 0 {
                if i < best.steps.count, case .start(let m, _) = best.steps[i] {
                    var trial = best
                    var j = i + 1
                    var drop = [i]
                    while j < trial.steps.count {
                        switch trial.steps[j] {
                        case .start(let n, _) where n == m: j = trial.steps.count
                        case .run(let n) where n == m, .crash(let n) where n == m: drop.append(j)
                        default: break
                        }
                        j += 1
                    }
                    for k in drop.reversed() { trial.steps.remove(at: k) }
                    if try fails(trial) { progress = true }
                }
                i -= 1
            }
            // Runs of steps, halving down to single ones.
            var chunk = max(1, best.steps.count / 2)
            while chunk >= 1 && plays < budget {
                var start = 0
                while start < best.steps.count {
                    var trial = best
                    trial.steps.removeSubrange(start..<min(best.steps.count, start + chunk))
                    if try fails(trial) { progress = true } else { start += chunk }
                }
                chunk /= 2
            }
        }
        return bestOutcome
    }

    // MARK: Playing

    private func play() throws -> Outcome {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try setUp()
        if generating {
            var started = 0
            var steps = 0
            while started < Simulation.operationsPerSchedule && steps < 400 {
                let step = nextStep()
                if case .start = step { started += 1 }
                steps += 1
                perform(step)
            }
        } else {
            for step in schedule.steps { perform(step) }
        }
        heal()
        check()
        var counts = ledger.counts
        counts["steps"] = played.count
        counts["refreshes"] = provider.refreshes
        counts["store requests"] = store.requests
        for (fault, n) in store.faults { counts["fault: " + fault] = n }
        let text = Schedule(seed: schedule.seed, setting: schedule.setting, steps: played).text
        return Outcome(
            seed: schedule.seed, schedule: text, violations: ledger.violations.map { "\($0.kind): \($0.detail)" },
            kinds: ledger.violations.map(\.kind), log: log, counts: counts)
    }

    /// The first machine creates the vault with three grants and syncs;
    /// the second joins. The third joins during the schedule.
    private func setUp() throws {
        let first = machines[0]
        let failure = FailureBox()
        runToEnd(first, label: "A create") {
            do {
                try first.random.installed { () throws in try first.create() }
            } catch {
                failure.error = error
            }
        }
        if let error = failure.error { throw error }
        for op in [Operation.importNew(name: "g1"), .importNew(name: "g2"), .importNew(name: "g3"), .sync] {
            runOperation(first, op)
        }
        runOperation(machines[1], .join)
        for m in machines.prefix(2) where !m.joined { throw SimulationError("\(m.name) could not be set up") }
    }

    private func runOperation(_ machine: SimMachine, _ op: Operation) {
        let box = ResultBox()
        runToEnd(machine, label: "\(machine.name) \(op.text)") { box.value = machine.perform(op) }
        log.append("\(machine.name) \(op.text) -> \(box.value.text)")
    }

    /// Runs `body` as a process of `machine` until it ends (the store is well).
    private func runToEnd(_ machine: SimMachine, label: String, _ body: @escaping @Sendable () -> Void) {
        let actor = Actor(label: label)
        machine.actor = actor
        world.start(actor, body)
        while actor.state != .done { world.resume(actor) }
        machine.actor = nil
    }

    /// The processes that may run now: those whose pause or answer is
    /// over, or, when none is, the one whose ends first. No process waits
    /// longer than it asked to.
    private var runnable: [SimMachine] {
        let parked = machines.filter { $0.actor?.state == .parked }
        let ready = parked.filter { $0.actor!.wake <= world.now }
        if !ready.isEmpty { return ready }
        guard let first = parked.map({ $0.actor!.wake }).min() else { return [] }
        return parked.filter { $0.actor!.wake == first }
    }

    /// The next step of a schedule made from the seed, given what runs now.
    private func nextStep() -> Step {
        let parked = runnable
        let idle = machines.filter { $0.actor == nil }
        let roll = numbers.below(100)
        if roll < 46, let m = pick(parked) { return .run(machine: m.index) }
        if roll < 72, let m = pick(idle) { return .start(machine: m.index, operation(for: m)) }
        if roll < 80 {
            // Mostly moments, sometimes longer than a lease or a token's life.
            return .wait(numbers.chance(80) ? numbers.double(0.1...5) : numbers.double(20...240))
        }
        if roll < 86 {
            switch numbers.below(4) {
            case 0: return .fail(1 + numbers.below(3))
            case 1: return .lose(1 + numbers.below(2))
            case 2: return .slow(numbers.chance(70) ? numbers.double(0.1...3) : numbers.double(3...40))
            default: return .drop(1)
            }
        }
        if roll < 90 {
            let m = numbers.below(machines.count)
            return .away(machine: m, !machines[m].away)
        }
        if roll < 91,
            let m = pick(
                machines.filter { $0.actor?.state == .parked }.filter { $0.actor?.label.hasSuffix(" join") == false })
        {
            return .crash(machine: m.index)
        }
        if let m = pick(parked) { return .run(machine: m.index) }
        return .wait(numbers.double(0.1...2))
    }

    private func pick(_ from: [SimMachine]) -> SimMachine? {
        from.isEmpty ? nil : from[numbers.below(from.count)]
    }

    private var serial = 10

    private func operation(for machine: SimMachine) -> Operation {
        guard machine.joined else { return .join }
        serial += 1
        let p = numbers.below(4)
        switch numbers.below(100) {
        case 0..<24: return .token(pick: p)
        case 24..<42: return .sync
        case 42..<50: return .refresh(pick: p)
        case 50..<58: return .importNew(name: "g\(serial)")
        case 58..<68: return .replace(pick: p, refreshable: numbers.chance(75))
        case 68..<78: return .rename(pick: p, to: "n\(serial)")
        case 78..<85: return .remove(pick: p)
        case 85..<87: return .passwd
        default: return .resolve(pick: p, keepOther: numbers.chance(50))
        }
    }

    private func perform(_ step: Step) {
        switch step {
        case .start(let m, let op):
            let machine = machines[m]
            guard machine.actor == nil, machine.joined != (op == .join) else { return }
            played.append(step)
            ledger.count("operation: " + (op.text.split(separator: " ").first.map(String.init) ?? ""))
            let actor = Actor(label: "\(machine.name) \(op.text)")
            machine.actor = actor
            world.start(actor) { [log = LogBox(self)] in log.append(actor.label + " -> " + machine.perform(op).text) }
            finishIfDone(machine)
        case .run(let m):
            let machine = machines[m]
            guard let actor = machine.actor, actor.state == .parked, runnable.contains(where: { $0 === machine })
            else { return }
            played.append(step)
            world.resume(actor)
            finishIfDone(machine)
        case .wait(let s):
            // Time moves on, but past no parked process's wake-up.
            played.append(step)
            let wakes = machines.compactMap { $0.actor?.state == .parked ? $0.actor!.wake : nil }
            world.now = max(world.now, min(world.now + s, wakes.min() ?? .infinity))
        case .slow(let s):
            played.append(step)
            store.slowNext = s
        case .fail(let n):
            played.append(step)
            store.failNext += n
        case .lose(let n):
            played.append(step)
            store.loseNext += n
        case .drop(let n):
            played.append(step)
            store.dropNext += n
        case .away(let m, let on):
            guard machines[m].away != on else { return }
            played.append(step)
            machines[m].away = on
            ledger.count("fault: away")
        case .crash(let m):
            let machine = machines[m]
            guard let actor = machine.actor, actor.state == .parked, !actor.label.hasSuffix(" join") else { return }
            played.append(step)
            ledger.count("killed")
            actor.crashed = true
            for handle in machine.handles { try? handle.database.execute("PRAGMA query_only = 1") }
            while actor.state != .done { world.resume(actor) }
            log.append("\(actor.label): killed")
            machine.actor = nil
        }
    }

    private func finishIfDone(_ machine: SimMachine) {
        if machine.actor?.state == .done { machine.actor = nil }
    }

    fileprivate func append(_ line: String) { log.append(line) }

    /// Faults stop; every process finishes; machines not yet in join; every
    /// machine syncs twice, one after another.
    private func heal() {
        log.append("-- healing")
        store.failNext = 0
        store.loseNext = 0
        store.dropNext = 0
        for m in machines { m.away = false }
        var resumes = 0
        while let next = machines.filter({ $0.actor != nil }).min(by: {
            ($0.actor!.wake, $0.index) < ($1.actor!.wake, $1.index)
        }) {
            world.resume(next.actor!)
            finishIfDone(next)
            resumes += 1
            if resumes > 100_000 {
                ledger.violation("processes still running after 100000 steps of healing", kind: "livelock")
                return
            }
        }
        for m in machines where !m.joined { finish(m, .join) }
        for _ in 0..<2 {
            for m in machines { finish(m, .sync) }
        }
    }

    /// Runs `op` on `machine` to its end with nothing else running; a
    /// failure is a violation (the store is well now).
    private func finish(_ machine: SimMachine, _ op: Operation) {
        let actor = Actor(label: "\(machine.name) \(op.text) (healing)")
        machine.actor = actor
        let box = ResultBox()
        world.start(actor) { box.value = machine.perform(op) }
        var steps = 0
        while actor.state != .done && steps < 100_000 {
            world.resume(actor)
            steps += 1
        }
        machine.actor = nil
        log.append(actor.label + " -> " + box.value.text)
        if actor.state != .done {
            ledger.violation("\(actor.label) did not end", kind: "livelock")
        } else if let code = box.value.error {
            ledger.violation("\(actor.label) failed with the store well: \(code) \(box.value.text)", kind: "heal")
        }
    }

    // MARK: Checking

    private func check() {
        Oracle(machines: machines, provider: provider, ledger: ledger, log: { [self] in log.append($0) }).check()
    }
}

/// An error of the simulation itself.
public struct SimulationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The simulation's log, appended to from the process that holds the baton.
private struct LogBox: @unchecked Sendable {
    let simulation: Simulation
    init(_ simulation: Simulation) { self.simulation = simulation }
    func append(_ line: String) { simulation.append(line) }
}

private final class FailureBox: @unchecked Sendable {
    var error: (any Error)?
}

private final class ResultBox: @unchecked Sendable {
    var value = SimMachine.Result(text: "", error: nil)
}
