internal import CFuzz
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// libFuzzer's entry point. The target comes from VAULT_FUZZ_TARGET; built
/// only by Tools/fuzz/run (VAULT_FUZZ=1, -sanitize=fuzzer,address).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    // A broken invariant is reported to libFuzzer as a crash.
    if !FuzzEntry.run(target, bytes) { abort() }
    return 0
}

/// SwiftPM links an executable's main as VaultFuzz_main: start libFuzzer here.
@_cdecl("VaultFuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in fuzzOne(data, size) }
}

let target: String = getenv("VAULT_FUZZ_TARGET").map { String(cString: $0) } ?? "header"
