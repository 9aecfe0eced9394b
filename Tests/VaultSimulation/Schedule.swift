import VaultCrypto

/// What a machine does in a simulation: the commands a person or a
/// program runs, each one process.
enum Operation: Equatable, Sendable {
    /// `vault import NAME`: a new grant, from a new authorization.
    case importNew(name: String)
    /// `vault import NAME --replace` on the `pick`th grant: new tokens from
    /// a new authorization (without a refresh token when `refreshable` is false).
    case replace(pick: Int, refreshable: Bool)
    /// `vault rename` of the `pick`th grant to `to`.
    case rename(pick: Int, to: String)
    /// `vault remove` of the `pick`th grant.
    case remove(pick: Int)
    /// `vault token` of the `pick`th grant.
    case token(pick: Int)
    /// `vault refresh` of the `pick`th grant.
    case refresh(pick: Int)
    /// `vault conflicts resolve` of the `pick`th conflict, keeping the other side or the current one.
    case resolve(pick: Int, keepOther: Bool)
    /// `vault sync`.
    case sync
    /// `vault join`: the machine's vault made from the store.
    case join
    /// `vault passwd`: a new passphrase (the machines unlock with their key
    /// file; the passphrase slot must reach every machine all the same).
    case passwd

    var text: String {
        switch self {
        case .importNew(let name): "import \(name)"
        case .replace(let pick, let refreshable): "replace \(pick)" + (refreshable ? "" : " bare")
        case .rename(let pick, let to): "rename \(pick) \(to)"
        case .remove(let pick): "remove \(pick)"
        case .token(let pick): "token \(pick)"
        case .refresh(let pick): "refresh \(pick)"
        case .resolve(let pick, let keepOther): "resolve \(pick) \(keepOther ? "other" : "current")"
        case .sync: "sync"
        case .join: "join"
        case .passwd: "passwd"
        }
    }

    init?(words: [Substring]) {
        func int(_ i: Int) -> Int? { words.count > i ? Int(words[i]) : nil }
        switch words.first {
        case "import" where words.count == 2: self = .importNew(name: String(words[1]))
        case "replace":
            guard let pick = int(1) else { return nil }
            self = .replace(pick: pick, refreshable: words.count < 3)
        case "rename" where words.count == 3:
            guard let pick = int(1) else { return nil }
            self = .rename(pick: pick, to: String(words[2]))
        case "remove": guard let pick = int(1) else { return nil }; self = .remove(pick: pick)
        case "token": guard let pick = int(1) else { return nil }; self = .token(pick: pick)
        case "refresh": guard let pick = int(1) else { return nil }; self = .refresh(pick: pick)
        case "resolve" where words.count == 3:
            guard let pick = int(1) else { return nil }
            self = .resolve(pick: pick, keepOther: words[2] == "other")
        case "sync": self = .sync
        case "join": self = .join
        case "passwd": self = .passwd
        default: return nil
        }
    }
}

/// One step of a schedule. The schedule fixes every choice the simulation
/// makes (which process runs next, what the store does wrong, when time
/// moves), so one schedule always plays the same way; a step that no
/// longer applies (a machine with nothing parked) is skipped, which is
/// what lets a failing schedule be shrunk by leaving steps out.
enum Step: Equatable, Sendable {
    /// Machine `machine` starts `operation` (if it runs nothing now).
    case start(machine: Int, Operation)
    /// The parked process of `machine` runs until it parks again or ends.
    case run(machine: Int)
    /// Time moves on.
    case wait(Double)
    /// The store answers the next `count` requests with 500.
    case fail(Int)
    /// The store applies the next `count` writes and the answers are lost.
    case lose(Int)
    /// The next `count` requests to the store are dropped before they arrive.
    case drop(Int)
    /// The store's answer to the next request takes this many seconds (a
    /// request whose timeout passes first fails, applied or not).
    case slow(Double)
    /// `machine` cannot reach the store (true) or can again (false).
    case away(machine: Int, Bool)
    /// The process of `machine` is killed where it is parked.
    case crash(machine: Int)

    static let names = ["A", "B", "C", "D", "E"]

    var text: String {
        switch self {
        case .start(let m, let op): "\(Step.names[m]) \(op.text)"
        case .run(let m): "run \(Step.names[m])"
        case .wait(let s): "wait \(Step.seconds(s))"
        case .fail(let n): "store fail \(n)"
        case .lose(let n): "store lose \(n)"
        case .drop(let n): "store drop \(n)"
        case .slow(let s): "store slow \(Step.seconds(s))"
        case .away(let m, let on): "away \(Step.names[m]) \(on ? "on" : "off")"
        case .crash(let m): "crash \(Step.names[m])"
        }
    }

    static func seconds(_ s: Double) -> String {
        let tenths = Int((abs(s) * 10).rounded())
        return (s < 0 && tenths > 0 ? "-" : "") + "\(tenths / 10).\(tenths % 10)"
    }

    init?(_ line: Substring) {
        let words = line.split(separator: " ")
        func machine(_ word: Substring) -> Int? { Step.names.firstIndex(of: String(word)) }
        switch words.first {
        case "run": guard words.count == 2, let m = machine(words[1]) else { return nil }; self = .run(machine: m)
        case "wait": guard words.count == 2, let s = Double(words[1]) else { return nil }; self = .wait(s)
        case "store" where words.count == 3 && words[1] == "slow":
            guard let s = Double(words[2]) else { return nil }
            self = .slow(s)
        case "store":
            guard words.count == 3, let n = Int(words[2]) else { return nil }
            switch words[1] {
            case "fail": self = .fail(n)
            case "lose": self = .lose(n)
            case "drop": self = .drop(n)
            default: return nil
            }
        case "away":
            guard words.count == 3, let m = machine(words[1]) else { return nil }
            self = .away(machine: m, words[2] == "on")
        case "crash": guard words.count == 2, let m = machine(words[1]) else { return nil }; self = .crash(machine: m)
        case .some(let first):
            guard let m = machine(first), let op = Operation(words: Array(words.dropFirst())) else { return nil }
            self = .start(machine: m, op)
        case nil: return nil
        }
    }
}

/// What a schedule is played in: the machines' clocks and the store's kind.
struct Setting: Equatable, Sendable {
    /// Each machine's clock minus true time, in seconds.
    var skews: [Double]
    /// False: the store ignores If-Match and If-None-Match.
    var honoursPreconditions: Bool
    /// True: the store checks a conditional write, then lets others in.
    var checksBeforeWriting: Bool

    var text: String {
        "machines \(skews.count) skews \(skews.map { ($0 >= 0 ? "+" : "") + Step.seconds($0) }.joined(separator: ","))"
            + " store \(honoursPreconditions ? "strict" : "lax")\(checksBeforeWriting ? " racy" : "")"
    }

    init(skews: [Double], honoursPreconditions: Bool, checksBeforeWriting: Bool) {
        self.skews = skews
        self.honoursPreconditions = honoursPreconditions
        self.checksBeforeWriting = checksBeforeWriting
    }

    init?(_ line: Substring) {
        let words = line.split(separator: " ")
        guard words.count >= 6, words[0] == "machines", words[2] == "skews", words[4] == "store" else { return nil }
        skews = words[3].split(separator: ",").compactMap { Double($0) }
        guard skews.count == Int(words[1]) else { return nil }
        honoursPreconditions = words[5] == "strict"
        checksBeforeWriting = words.count > 6 && words[6] == "racy"
    }
}

/// A whole schedule: the setting, and the steps of its faulty part. The
/// healing that follows (faults stop, every process finishes, every
/// machine syncs twice) is the same for all.
struct Schedule: Equatable, Sendable {
    var seed: UInt64
    var setting: Setting
    var steps: [Step]

    var text: String {
        (["seed \(seed)", setting.text] + steps.map(\.text)).joined(separator: "\n") + "\n"
    }

    /// Parses `text` (as `text` writes it); nil when a line is not a step.
    init?(text: String) {
        var lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }[...]
        guard let first = lines.popFirst(), first.hasPrefix("seed "), let seed = UInt64(first.dropFirst(5)),
            let second = lines.popFirst(), let setting = Setting(Substring(second))
        else { return nil }
        var steps: [Step] = []
        for line in lines {
            guard let step = Step(Substring(line)) else { return nil }
            steps.append(step)
        }
        self.init(seed: seed, setting: setting, steps: steps)
    }

    init(seed: UInt64, setting: Setting, steps: [Step]) {
        self.seed = seed
        self.setting = setting
        self.steps = steps
    }
}

/// The schedule generator's random numbers, fixed by the seed: the same
/// seeded stream that stands in for the machines' random bytes.
struct SeededNumbers {
    private let stream: SeededRandom

    init(seed: UInt64) throws {
        stream = try SeededRandom(seed: Array("schedule \(seed)".utf8))
    }

    /// A number in `0..<bound`.
    func below(_ bound: Int) -> Int { Int(stream.next() % UInt64(max(1, bound))) }

    /// True with probability `percent` / 100.
    func chance(_ percent: Int) -> Bool { below(100) < percent }

    /// A number in `range`.
    func double(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + Double(stream.next() >> 11) / Double(1 << 53) * (range.upperBound - range.lowerBound)
    }
}
