internal import COpenSSL
internal import CSodium

/// The signatures of DPoP proofs (RFC 9449): Ed25519 through libsodium and
/// ECDSA P-256 through OpenSSL's libcrypto (libsodium has no P-256). Each
/// private key is generated here and only ever leaves as the bytes vault
/// keeps encrypted in the vault.
package enum ProofSignature {
    /// A JWS algorithm a proof key signs with.
    package enum Algorithm: String, Sendable, CaseIterable {
        /// ECDSA on P-256 with SHA-256 (RFC 7518 section 3.4). The private
        /// key is a DER ECPrivateKey (RFC 5915).
        case es256 = "ES256"
        /// Ed25519 (RFC 8037). The private key is the 32-byte seed.
        case edDSA = "EdDSA"
    }

    /// A new private key for `algorithm`.
    package static func generate(_ algorithm: Algorithm) throws(CryptoError) -> SecureBytes {
        switch algorithm {
        case .edDSA:
            try Sodium.ready()
            return try SecureBytes(randomCount: Int(crypto_sign_SEEDBYTES))
        case .es256:
            try RSASignature.loaded()
            var der = [UInt8](repeating: 0, count: 256)
            defer { secureZero(&der) }
            var length = 0
            guard vault_p256_generate(&der, der.count, &length) == 0 else {
                throw CryptoError(.invalidParameter, "a P-256 key could not be generated")
            }
            return try SecureBytes(copying: der.prefix(length))
        }
    }

    /// The public key's JWK members (RFC 7517), in the lexicographic order of
    /// RFC 7638's thumbprint: `crv`, `kty`, `x` (and `y` for P-256).
    package static func publicJWK(_ algorithm: Algorithm, privateKey: SecureBytes) throws(CryptoError)
        -> [(name: String, value: String)]
    {
        switch algorithm {
        case .edDSA:
            let (publicKey, _) = try ed25519(privateKey)
            return [("crv", "Ed25519"), ("kty", "OKP"), ("x", Base64.encodeString(publicKey, .urlSafeUnpadded))]
        case .es256:
            try RSASignature.loaded()
            var x = [UInt8](repeating: 0, count: 32)
            var y = [UInt8](repeating: 0, count: 32)
            let rc = privateKey.withPointer { p, n in vault_p256_public(p, n, &x, &y) }
            guard rc == 0 else { throw CryptoError(.invalidParameter, "the proof key is not a P-256 key") }
            return [
                ("crv", "P-256"), ("kty", "EC"),
                ("x", Base64.encodeString(x, .urlSafeUnpadded)), ("y", Base64.encodeString(y, .urlSafeUnpadded)),
            ]
        }
    }

    /// The JWS signature of `data`: 64 bytes for both algorithms (P-256's r
    /// and s, RFC 7518 section 3.4).
    package static func sign(_ algorithm: Algorithm, privateKey: SecureBytes, data: [UInt8]) throws(CryptoError)
        -> [UInt8]
    {
        var signature = [UInt8](repeating: 0, count: 64)
        switch algorithm {
        case .edDSA:
            let (_, secretKey) = try ed25519(privateKey)
            var length: UInt64 = 0
            let rc = secretKey.withPointer { sk, _ in
                crypto_sign_detached(&signature, &length, data, UInt64(data.count), sk)
            }
            guard rc == 0, length == 64 else { throw CryptoError(.invalidParameter, "ed25519 signing failed") }
        case .es256:
            try RSASignature.loaded()
            let rc = privateKey.withPointer { p, n in vault_p256_sign(p, n, data, data.count, &signature) }
            guard rc == 0 else { throw CryptoError(.invalidParameter, "es256 signing failed") }
        }
        return signature
    }

    /// Ed25519's public key and libsodium's secret key for a 32-byte seed.
    private static func ed25519(_ seed: SecureBytes) throws(CryptoError) -> ([UInt8], SecureBytes) {
        try Sodium.ready()
        guard seed.count == Int(crypto_sign_SEEDBYTES) else {
            throw CryptoError(.invalidParameter, "the proof key is not an Ed25519 seed")
        }
        var publicKey = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        var rc: Int32 = 0
        let secretKey = try SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES)) { sk in
            rc = seed.withPointer { s, _ in
                crypto_sign_seed_keypair(&publicKey, sk.baseAddress!.assumingMemoryBound(to: UInt8.self), s)
            }
        }
        guard rc == 0 else { throw CryptoError(.invalidParameter, "the ed25519 key could not be derived") }
        return (publicKey, secretKey)
    }
}
