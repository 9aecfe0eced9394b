#!/usr/bin/env python3
"""Known-answer vectors for the vault format, written from docs/format.md.

This is a second implementation of the format, independent of the Swift
code: if both agree on these bytes, the document describes what the code
does. Run it to regenerate Tests/VaultCoreTests/Vectors/format-v1.json:

    pip install pynacl && python3 Tools/vectors/generate.py

All randomness comes from a fixed seed, so the output is stable.
"""
import base64
import hashlib
import json
import os
import struct
import unicodedata

import nacl.bindings as sodium
import nacl.pwhash

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "VaultCoreTests", "Vectors", "format-v1.json")
MIN_OPS, MIN_MEM = 2, 64 << 20


class DeterministicRandom:
    """Bytes from BLAKE2b in counter mode over a seed label."""

    def __init__(self, seed):
        self.seed, self.counter = seed.encode(), 0

    def bytes(self, n):
        out = b""
        while len(out) < n:
            out += hashlib.blake2b(self.seed + struct.pack(">Q", self.counter), digest_size=64).digest()
            self.counter += 1
        return out[:n]


def checksum(body):
    return body + hashlib.blake2b(body, digest_size=16).digest()


def subkey(mk, ident, context):
    # crypto_kdf_derive_from_key: BLAKE2b keyed by MK, salt = LE64(id) || 0^8, personal = ctx || 0^8.
    return hashlib.blake2b(b"", digest_size=32, key=mk, salt=struct.pack("<Q", ident) + bytes(8),
                           person=context.encode() + bytes(8)).digest()


def mac(key, data):
    return hashlib.blake2b(data, digest_size=32, key=key).digest()


def pad(data, block):
    # sodium_pad (ISO/IEC 7816-4): 0x80 then zeros up to the next multiple; a full block if aligned.
    n = (len(data) // block + 1) * block
    return data + b"\x80" + bytes(n - len(data) - 1)


def header(vault_id, epoch, created):
    return b"vault-db" + struct.pack(">H", 1) + vault_id + struct.pack(">IQ", epoch, created)


def keyslot_passphrase(rng, mk, vault_id, passphrase, ops, mem):
    salt = rng.bytes(16)
    prefix = b"vault-ks" + struct.pack(">HBBIQ", 1, 1, 1, ops, mem) + salt
    kek = nacl.pwhash.argon2id.kdf(32, unicodedata.normalize("NFC", passphrase).encode(), salt,
                                   opslimit=ops, memlimit=mem)
    return seal_slot(rng, mk, vault_id, prefix, kek)


def keyslot_keyfile(rng, mk, vault_id, secret):
    prefix = b"vault-ks" + struct.pack(">HB", 1, 2)
    kek = hashlib.blake2b(secret, digest_size=32, person=b"vault.keyfile".ljust(16, b"\0")).digest()
    return seal_slot(rng, mk, vault_id, prefix, kek)


def seal_slot(rng, mk, vault_id, prefix, kek):
    nonce = rng.bytes(24)
    ad = b"vault.keyslot.v1" + vault_id + prefix
    wrapped = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(mk, ad, nonce, kek)
    return checksum(prefix + nonce + wrapped)


def name_hash(mk, name):
    return mac(subkey(mk, 1, "vaultnam"), b"vault.name.v1" + unicodedata.normalize("NFC", name).encode())


def record(rng, mk, hdr, vault_id, epoch, rid, version, deleted, name, grant):
    nh = name_hash(mk, name)
    payload = {"name": name}
    if grant is not None:
        payload["grant"] = grant
    plain = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    nonce = rng.bytes(24)
    ad = b"vault.record.v1" + vault_id + struct.pack(">I", epoch) + rid + struct.pack(">QB", version, deleted) + nh
    ct = sodium.crypto_aead_xchacha20poly1305_ietf_encrypt(pad(plain, 256), ad, nonce, subkey(mk, 1, "vaultrec"))
    return {"id": rid.hex(), "name_hash": nh.hex(), "version": version, "deleted": deleted,
            "nonce": nonce.hex(), "ciphertext": ct.hex()}


def state(mk, hdr, generation, entries):
    body = b"vault-st" + struct.pack(">HQI", 1, generation, len(entries))
    for rid, version, deleted in sorted(entries):
        body += rid + struct.pack(">QB", version, deleted)
    tag = mac(subkey(mk, 1, "vaultsta"), b"vault.state.v1" + hdr + body)
    return checksum(body + tag)


def vault_vector():
    rng = DeterministicRandom("vault format v1 vectors")
    mk = rng.bytes(32)
    vault_id = rng.bytes(16)
    epoch, created = 1, 1767225600
    hdr = header(vault_id, epoch, created)
    passphrase_nfc = "gr\u00fcne Tr\u00e4ume \u00e9t\u00e9"
    passphrase_nfd = unicodedata.normalize("NFD", passphrase_nfc)
    keyfile_secret = rng.bytes(32)
    slots = [keyslot_passphrase(rng, mk, vault_id, passphrase_nfc, MIN_OPS, MIN_MEM),
             keyslot_keyfile(rng, mk, vault_id, keyfile_secret)]
    grants = [
        ("work", 3, 0, {
            "provider": "google", "kind": "oauth2", "account": "ada@example.com",
            "access_token": "ya29.vector-access", "refresh_token": "1//vector-refresh",
            "token_type": "Bearer", "expires_at": 1767229200, "scopes": ["openid", "email"],
            "created_at": 1767225600, "refreshed_at": 1767225700, "dead": False,
            "provider_config": {"token_endpoint": "https://oauth2.googleapis.com/token", "client_id": "cid"}}),
        ("gh", 1, 0, {
            "provider": "github", "kind": "oauth2", "access_token": "gho_vector", "scopes": ["repo"],
            "created_at": 1767225600, "dead": False}),
        ("flickr", 2, 0, {
            "provider": "flickr", "kind": "oauth1", "access_token": "72157-vector", "token_secret": "s3cr3t",
            "scopes": [], "created_at": 1767225600, "dead": True, "dead_reason": "invalid_grant"}),
        ("old", 2, 1, None),
    ]
    records, entries, expect = [], [], []
    for name, version, deleted, grant in grants:
        rid = rng.bytes(16)
        records.append(record(rng, mk, hdr, vault_id, epoch, rid, version, deleted, name, grant))
        entries.append((rid, version, deleted))
        if grant is not None:
            expect.append({"name": name, "grant": grant})
    return {
        "description": "a vault with a passphrase slot (NFC passphrase), a key file slot, three grants and a tombstone",
        "master_key": mk.hex(),
        "passphrase": passphrase_nfd,
        "passphrase_nfc": passphrase_nfc,
        "keyfile": "vault-keyfile-v1:" + base64.urlsafe_b64encode(keyfile_secret).rstrip(b"=").decode() + "\n",
        "header": checksum(hdr).hex(),
        "keyslots": [s.hex() for s in slots],
        "state": state(mk, hdr, 7, entries).hex(),
        "records": records,
        "grants": sorted(expect, key=lambda g: g["name"]),
        "name_hashes": {name: name_hash(mk, name).hex() for name, *_ in grants},
    }


def refused_keyslots(mk, vault_id):
    """Slots with a valid checksum that must be refused before any Argon2id work."""
    rng = DeterministicRandom("refused keyslots")
    salt, nonce, wrapped = rng.bytes(16), rng.bytes(24), rng.bytes(48)

    def slot(version=1, kind=1, alg=1, ops=MIN_OPS, mem=MIN_MEM, trailing=b""):
        params = struct.pack(">BIQ", alg, ops, mem) + salt if kind == 1 else b""
        return checksum(b"vault-ks" + struct.pack(">HB", version, kind) + params + nonce + wrapped + trailing).hex()

    return [
        {"why": "memory below the 64 MiB floor", "hex": slot(mem=MIN_MEM - 1), "error": "vault.damaged"},
        {"why": "memory above the 4 GiB cap", "hex": slot(mem=(4 << 30) + 1), "error": "vault.damaged"},
        {"why": "one pass, below the floor", "hex": slot(ops=1), "error": "vault.damaged"},
        {"why": "21 passes, above the cap", "hex": slot(ops=21), "error": "vault.damaged"},
        {"why": "unknown key derivation", "hex": slot(alg=2), "error": "vault.unsupported"},
        {"why": "unknown slot version", "hex": slot(version=2), "error": "vault.unsupported"},
        {"why": "unknown kind", "hex": slot(kind=9), "error": "vault.damaged"},
        {"why": "trailing byte", "hex": slot(trailing=b"\0"), "error": "vault.damaged"},
        {"why": "checksum mismatch", "hex": slot()[:-2] + "00", "error": "vault.damaged"},
    ]


def main():
    v = vault_vector()
    doc = {
        "format": "vault format v1 known-answer vectors, generated by Tools/vectors/generate.py",
        "vault": v,
        "refused_keyslots": refused_keyslots(bytes.fromhex(v["master_key"]), bytes.fromhex(v["header"])[10:26]),
        "refused_headers": [
            {"why": "format version 2", "hex": checksum(b"vault-db" + struct.pack(">H", 2) + bytes(28)).hex(),
             "error": "vault.unsupported"},
            {"why": "wrong magic", "hex": checksum(b"vault-xx" + struct.pack(">H", 1) + bytes(28)).hex(),
             "error": "vault.damaged"},
            {"why": "truncated", "hex": checksum(b"vault-db" + struct.pack(">H", 1) + bytes(27)).hex(),
             "error": "vault.damaged"},
            {"why": "trailing byte", "hex": checksum(b"vault-db" + struct.pack(">H", 1) + bytes(29)).hex(),
             "error": "vault.damaged"},
        ],
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
