internal import FoundationEssentials
internal import Glibc
internal import VaultCrypto

/// How a vault's operations wait, and measure their waits: the system's
/// sleep and clocks, or a simulation's (Tests/VaultSimulation), which runs
/// several machines in one process on a clock it moves itself. Carried by
/// the `Vault` handle, so that the refresh lock, the sync engine and the
/// store client all wait through it.
package struct Pacing: Sendable {
    /// Waits `seconds`.
    package var sleep: @Sendable (Double) -> Void
    /// Seconds since an arbitrary point, never going back: for measuring
    /// waits on this machine, never for comparing with another.
    package var monotonic: @Sendable () -> Double
    /// Seconds since this machine booted, suspend included, with the
    /// boot's id, so that readings of two boots are never compared (lease
    /// observations, docs/sync.md "Leases and clocks").
    package var boot: @Sendable () -> BootReading

    package init(
        sleep: @escaping @Sendable (Double) -> Void, monotonic: @escaping @Sendable () -> Double,
        boot: @escaping @Sendable () -> BootReading
    ) {
        self.sleep = sleep
        self.monotonic = monotonic
        self.boot = boot
    }

    /// The operating system's: `usleep`, CLOCK_MONOTONIC, CLOCK_BOOTTIME.
    package static let system = Pacing(
        sleep: { seconds in
            guard seconds > 0 else { return }
            usleep(UInt32(min(seconds, 4000) * 1_000_000))
        },
        monotonic: { Pacing.clock(CLOCK_MONOTONIC) },
        boot: { BootReading(bootID: Pacing.bootID, seconds: Pacing.clock(CLOCK_BOOTTIME)) })

    /// Waits `seconds` times a random factor in 1/2...1 (a jittered pause).
    package func pause(upTo seconds: Double) {
        sleep(seconds / 2 + Random.fraction() * seconds / 2)
    }

    private static func clock(_ id: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(id, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// The kernel's random id of this boot (36 ASCII bytes), or empty when
    /// unreadable (then every process judges leases afresh).
    private static let bootID: [UInt8] = {
        guard let text = try? FileSystem.readFile("/proc/sys/kernel/random/boot_id", limit: 64) else { return [] }
        return Array(text.prefix(36))
    }()
}

/// What a simulation is told from inside a sync (`Vault.syncTrace`).
package enum SyncTraceEvent: Sendable {
    /// The records of the store's root with this hash (BLAKE2b-32 of its
    /// bytes) were merged into the vault, committed.
    case merged(rootHash: [UInt8])
}

/// A reading of a machine's boot clock.
package struct BootReading: Sendable, Equatable {
    /// The boot's id; empty when unknown.
    package var bootID: [UInt8]
    /// Seconds since boot, suspend included.
    package var seconds: Double

    package init(bootID: [UInt8], seconds: Double) {
        self.bootID = bootID
        self.seconds = seconds
    }
}

/// Seconds on this machine's monotonic clock: for measuring waits, never
/// for comparing with another machine. Code that has a vault measures
/// through its `pacing` instead, so that a simulation can move the clock.
package enum Monotonic {
    /// Seconds since an arbitrary point (CLOCK_MONOTONIC).
    package static func seconds() -> Double { Pacing.system.monotonic() }
}
