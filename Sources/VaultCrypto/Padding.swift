internal import CSodium

/// ISO/IEC 7816-4 padding (`sodium_pad`), so ciphertext lengths reveal
/// only a multiple of the block size.
public enum Padding {
    /// Pads to the next multiple of `blockSize` (always adds at least one byte).
    public static func pad(_ data: SecureBytes, blockSize: Int) throws(CryptoError) -> SecureBytes {
        try Sodium.ready()
        guard blockSize > 0 else { throw CryptoError(.invalidParameter, "block size must be positive") }
        let capacity = (data.count / blockSize + 1) * blockSize
        var padded = 0
        var rc: Int32 = -1
        let out = try SecureBytes(count: capacity) { o in
            let typed = o.baseAddress!.assumingMemoryBound(to: UInt8.self)
            rc = data.withPointer { d, dCount in
                typed.update(from: d, count: dCount)
                return sodium_pad(&padded, typed, dCount, blockSize, capacity)
            }
        }
        guard rc == 0, padded == capacity else { throw CryptoError(.invalidParameter, "padding failed") }
        return out
    }

    /// Removes padding added by `pad`; throws on malformed padding.
    public static func unpad(_ data: SecureBytes, blockSize: Int) throws(CryptoError) -> SecureBytes {
        try Sodium.ready()
        guard blockSize > 0, data.count > 0, data.count % blockSize == 0 else {
            throw CryptoError(.invalidPadding, "padded length is not a multiple of the block size")
        }
        var length = 0
        let rc = data.withPointer { d, dCount in sodium_unpad(&length, d, dCount, blockSize) }
        guard rc == 0 else { throw CryptoError(.invalidPadding, "padding is malformed") }
        return try data.prefix(length)
    }

    /// The unpadded length of the first `count` bytes of `data`.
    public static func unpaddedLength(_ data: SecureBuffer, count: Int, blockSize: Int) throws(CryptoError) -> Int {
        try Sodium.ready()
        guard blockSize > 0, count > 0, count <= data.count, count % blockSize == 0 else {
            throw CryptoError(.invalidPadding, "padded length is not a multiple of the block size")
        }
        var length = 0
        let rc = data.withPointer { d, _ in sodium_unpad(&length, d, count, blockSize) }
        guard rc == 0 else { throw CryptoError(.invalidPadding, "padding is malformed") }
        return length
    }
}
