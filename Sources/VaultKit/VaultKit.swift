// The library an app imports: `import VaultKit` brings the core (grants,
// the vault file, keyslots, OAuth flows and providers), sync and the agent
// client. The targets behind it stay separate so that the core cannot name
// sync or the agent; this module only gathers their public API.
@_exported public import VaultAgent
@_exported public import VaultCore
@_exported public import VaultSync
