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
        let length = data.withPointer { d, dCount in Padding.unpaddedLength(d, count: dCount, blockSize: blockSize) }
        guard let length else { throw CryptoError(.invalidPadding, "padding is malformed") }
        return try data.prefix(length)
    }

    /// The unpadded length of the first `count` bytes of `data`.
    public static func unpaddedLength(_ data: SecureBuffer, count: Int, blockSize: Int) throws(CryptoError) -> Int {
        guard blockSize > 0, count > 0, count <= data.count, count % blockSize == 0 else {
            throw CryptoError(.invalidPadding, "padded length is not a multiple of the block size")
        }
        let length = data.withPointer { d, _ in Padding.unpaddedLength(d, count: count, blockSize: blockSize) }
        guard let length else { throw CryptoError(.invalidPadding, "padding is malformed") }
        return length
    }

    /// The length before `pad`'s padding (ISO/IEC 7816-4: `0x80`, then
    /// zeros to the end of the block), or nil when the last block holds
    /// none. Every byte of the last block is read, and none decides a
    /// branch, as in libsodium's `sodium_unpad`; written here because that
    /// one spends more instructions on a record than decrypting it does
    /// (about 12,900 for a block of 256), and a listing unpads thousands.
    /// `count` must be a positive multiple of `blockSize`.
    static func unpaddedLength(_ bytes: UnsafePointer<UInt8>, count: Int, blockSize: Int) -> Int? {
        var zerosOnly: UInt = 1  // 1 while every byte read (from the end) was zero
        var found: UInt = 0  // 1 once the marker right before those zeros was read
        var zeros: UInt = 0  // how many zeros follow the marker
        for i in 0..<blockSize {
            let c = UInt(bytes[count - 1 - i])
            let isZero = ((c &- 1) >> 8) & 1
            let isMarker = (((c ^ 0x80) &- 1) >> 8) & 1
            let here = zerosOnly & isMarker
            zeros |= UInt(i) & (0 &- here)
            found |= here
            zerosOnly &= isZero
        }
        return found == 1 ? count - 1 - Int(zeros) : nil
    }
}
