package import VaultCrypto

/// Runs a VaultCrypto call and maps its errors to `VaultError`. Only
/// `authenticationFailed` needs context, so callers catch that themselves.
package func wrap<R>(_ body: () throws(CryptoError) -> R) throws(VaultError) -> R {
    do {
        return try body()
    } catch {
        switch error.code {
        case .authenticationFailed: throw VaultError(.tampered, error.reason)
        case .invalidParameter, .invalidPadding: throw VaultError(.damaged, error.reason)
        case .outOfMemory, .unavailable: throw VaultError(.internalError, error.reason)
        }
    }
}
