//! [`Standing`]: what a lead says of itself (`GetLeadership`, `lead
//! status`, a standby's answers and console): its role, the lease's epoch
//! and expiry, the store, and who leads.

/// A lead's role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Role {
    /// The only lead there is: its store is its own (SQLite, memory).
    #[default]
    Sole,
    /// Holds the lease on a shared store, and serves.
    Active,
    /// Waits for the lease, and names the active lead to every caller.
    Standby,
}

impl Role {
    /// As `lead status` and the metadata say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Sole => "sole",
            Role::Active => "active",
            Role::Standby => "standby",
        }
    }
}

/// What a lead is now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    /// Its role.
    pub role: Role,
    /// Where its clients reach it.
    pub url: String,
    /// The lease's epoch (0 with no lease).
    pub epoch: i64,
    /// When the lease expires, on the database's clock (Unix ms; 0 with no
    /// lease, or one resigned).
    pub lease_expires_unix_ms: i64,
    /// The store, without credentials.
    pub store: String,
    /// The active lead's URL (this lead's own while it leads; empty while
    /// none does).
    pub leader_url: String,
    /// The active lead's console (empty when it has none).
    pub leader_console: String,
}

/// The metadata keys a standby's answers carry beside `mesh-leader`.
pub const ROLE_KEY: &str = "mesh-role";
/// The lease's epoch.
pub const EPOCH_KEY: &str = "mesh-epoch";
/// The lease's expiry (Unix ms, the database's clock).
pub const EXPIRES_KEY: &str = "mesh-lease-expires-ms";
