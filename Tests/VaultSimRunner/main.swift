import Foundation
import VaultSimulation

// vault-sim: plays schedules of the sync simulation (docs/sync.md,
// "Simulation") and reports the failing ones, shrunk.
//
//   vault-sim [--seed N] [--schedules M] [--jobs J] [--no-shrink]
//   vault-sim --play FILE        # a schedule as printed for a failure (shrunk again when it fails)
//   vault-sim --show ...         # print every schedule and what it did
//   vault-sim --kind KIND ...    # report only failures of that kind ("lost edit", ...)
//   vault-sim --counted EVENT .. # name the seeds that counted EVENT (an allowed loss,
//                                # "newest refresh token lost while the store was away", ...),
//                                # and print the first ones shrunk to the fewest steps that still count it
//
// Seeds N, N+1, ... N+M-1, J at a time. Exit status 1 when a schedule failed.

struct Options {
    var seed: UInt64 = 1
    var schedules = 100
    var jobs = 2
    var shrink = true
    var play: String?
    var show = false
    var kind: String?
    var counted: String?

    init(_ words: [String]) {
        var words = words[...]
        func value(_ flag: String) -> String {
            guard let v = words.popFirst() else { Options.fail("\(flag) needs a value") }
            return v
        }
        func number(_ flag: String) -> Int {
            guard let n = Int(value(flag)), n >= 0 else { Options.fail("\(flag) takes a number") }
            return n
        }
        while let flag = words.popFirst() {
            switch flag {
            case "--seed": seed = UInt64(number(flag))
            case "--schedules": schedules = number(flag)
            case "--jobs": jobs = max(1, number(flag))
            case "--no-shrink": shrink = false
            case "--play": play = value(flag)
            case "--show": show = true
            case "--kind": kind = value(flag)
            case "--counted": counted = value(flag)
            default: Options.fail("unknown option \(flag)")
            }
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("vault-sim: \(message)\n".utf8))
        exit(64)
    }
}

/// What the workers found, behind one lock.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var next: UInt64
    private let end: UInt64
    private(set) var totals: [String: Int] = [:]
    private(set) var failed: [Simulation.Outcome] = []
    /// The schedules that counted the event asked about (`--counted`).
    private(set) var counting: [Simulation.Outcome] = []
    let counted: String?

    init(from: UInt64, count: Int, counted: String?) {
        next = from
        end = from + UInt64(count)
        self.counted = counted
    }

    func take() -> UInt64? {
        lock.withLock {
            guard next < end else { return nil }
            defer { next += 1 }
            return next
        }
    }

    func add(_ outcome: Simulation.Outcome) {
        lock.withLock {
            for (k, v) in outcome.counts { totals[k, default: 0] += v }
            for kind in Set(outcome.kinds) { totals["failed: " + kind, default: 0] += 1 }
            if !outcome.passed { failed.append(outcome) }
            if let counted, outcome.counts[counted, default: 0] > 0 { counting.append(outcome) }
        }
    }

    func couldNotRun(_ seed: UInt64, _ error: any Error) {
        lock.withLock {
            print("seed \(seed): the simulation could not run: \(error)")
            totals["could not run", default: 0] += 1
        }
    }
}

func report(_ outcome: Simulation.Outcome, as title: String = "FAILED") {
    print("\(title) schedule:\n" + outcome.schedule)
    for v in outcome.violations { print("  violation: " + v) }
    print("  log:")
    for line in outcome.log { print("    " + line) }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
if let file = options.play {
    guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { Options.fail("cannot read \(file)") }
    let outcome = try Simulation.play(text)
    if let counted = options.counted, outcome.passed, outcome.counts[counted, default: 0] > 0 {
        report(options.shrink ? try Simulation.shrink(outcome, counted: counted) : outcome, as: "COUNTING")
    } else if outcome.passed {
        print("passed")
        for line in outcome.log { print("    " + line) }
    } else {
        report(options.shrink ? try Simulation.shrink(outcome) : outcome)
    }
    exit(outcome.passed ? 0 : 1)
}

let started = Date()
let tally = Tally(from: options.seed, count: options.schedules, counted: options.counted)
let group = DispatchGroup()
for _ in 0..<options.jobs {
    group.enter()
    let thread = Thread {
        while let seed = tally.take() {
            do {
                let outcome = try Simulation.run(seed: seed)
                if options.show {
                    print(outcome.schedule + outcome.log.map { "    " + $0 }.joined(separator: "\n"))
                }
                tally.add(outcome)
            } catch {
                tally.couldNotRun(seed, error)
            }
        }
        group.leave()
    }
    thread.stackSize = 8 << 20
    thread.start()
}
group.wait()
let seconds = Date().timeIntervalSince(started)
print(
    "\(options.schedules) schedules (seeds \(options.seed)...\(options.seed + UInt64(options.schedules) - 1)) in "
        + "\(String(format: "%.1f", seconds)) s: \(String(format: "%.1f", Double(options.schedules) / seconds)) "
        + "schedules/s, \(tally.failed.count) failed")
for (k, v) in tally.totals.sorted(by: { $0.key < $1.key }) { print("  \(k): \(v)") }
let reported = tally.failed.filter { outcome in options.kind.map { outcome.kinds.contains($0) } ?? true }
for outcome in reported.sorted(by: { $0.schedule < $1.schedule }).prefix(5) {
    report(options.shrink ? (try? Simulation.shrink(outcome)) ?? outcome : outcome)
}
if let counted = options.counted {
    let counting = tally.counting.sorted { $0.seed < $1.seed }
    print("'\(counted)' counted in \(counting.count) schedules" + (counting.isEmpty ? "" : ", seeds:"))
    for outcome in counting { print("  seed \(outcome.seed): \(outcome.counts[counted] ?? 0)") }
    if options.shrink {
        for outcome in counting.prefix(2) {
            report((try? Simulation.shrink(outcome, counted: counted)) ?? outcome, as: "COUNTING")
        }
    }
}
exit(tally.failed.isEmpty ? 0 : 1)
