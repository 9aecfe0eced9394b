// The library an app imports: `import VaultKit` brings the core (grants,
// the vault file, keyslots, OAuth flows and providers), sync, the agent
// client, the HTTP transport (`CurlTransport`) and secure memory
// (`SecureBytes`), plus the async API of this module (`GrantStore`,
// `VaultGrantStore`, `InMemoryGrantStore`, `TokenSession`). The targets
// behind it stay separate so that the core cannot name sync or the agent;
// this module gathers their public API. docs/library.md is the guide.
@_exported public import VaultAgent
@_exported public import VaultCore
@_exported public import VaultCrypto
@_exported public import VaultHTTP
@_exported public import VaultSync
