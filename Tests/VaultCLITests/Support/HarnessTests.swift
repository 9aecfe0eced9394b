import Foundation
import Testing
import VaultTestSupport

/// The harness that runs every command of these tests: a child that never
/// stops writing, or that leaves its output open behind it, fails the test
/// that ran it instead of holding up or filling the whole run.
@Suite("the test harness's child processes")
struct HarnessTests {
    @Test("a child that writes without end is killed once it passes the limit, and says so")
    func endlessOutput() throws {
        let child = try VaultProcess.start([], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/yes")
        let r = child.wait(timeout: 60)
        #expect(r.status == 255)
        #expect(r.stderr.contains("[test harness: stdout passed 64 MiB: the process was killed]"))
        #expect(kill(child.pid, 0) != 0)
    }

    @Test("output held open by a grandchild after a timeout is given up, and the group killed")
    func heldOpenOutput() throws {
        let child = try VaultProcess.start(
            ["-c", "sleep 300 & exec sleep 300"], environment: ["PATH": "/usr/bin:/bin"], executable: "/bin/sh")
        let r = child.wait(timeout: 0.5)
        #expect(r.status == 255)
        #expect(r.stderr.contains("was still open long after the process was killed for taking too long"))
        #expect(livingMembers(ofGroup: child.pid).isEmpty)
    }

    /// Processes of a group that are not zombies (a killed orphan may stay
    /// one until something reaps it).
    private func livingMembers(ofGroup group: Int32) -> [String] {
        for _ in 0..<20 {
            let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            let living = ids.filter { id in
                guard Int32(id) != nil, let stat = try? String(contentsOfFile: "/proc/\(id)/stat", encoding: .utf8),
                    let end = stat.range(of: ") ", options: .backwards)
                else { return false }
                let fields = stat[end.upperBound...].split(separator: " ")
                return fields.count > 2 && fields[0] != "Z" && fields[2] == "\(group)"
            }
            if living.isEmpty { return [] }
            usleep(50_000)
        }
        return ["still alive in group \(group)"]
    }
}
