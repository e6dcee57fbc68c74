//! The caps' bookkeeping: what one peer counts as for
//! `--max-connections-per-address`, how many each holds, and the slot an
//! open connection holds under both caps.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
};

use tokio::sync::OwnedSemaphorePermit;

/// What one peer counts as for `per_address`: its IPv4 address (an
/// IPv4-mapped IPv6 address is that IPv4 address), or its IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Address {
    V4([u8; 4]),
    V6Prefix([u8; 8]),
}

impl From<IpAddr> for Address {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Address::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Address::V4(v4.octets()),
                None => {
                    let mut prefix = [0; 8];
                    prefix.copy_from_slice(&v6.octets()[..8]);
                    Address::V6Prefix(prefix)
                }
            },
        }
    }
}

/// Connections open per address.
#[derive(Debug, Default)]
pub(super) struct PerAddress {
    open: Mutex<HashMap<Address, usize>>,
}

impl PerAddress {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Address, usize>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot for `address`, unless it holds `max` already.
    pub(super) fn take(self: &Arc<Self>, address: Address, max: usize) -> Option<AddressSlot> {
        let mut open = self.lock();
        let count = open.entry(address).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: self.clone(),
            address,
        })
    }
}

/// One connection's place among its address's, given back when it closes.
#[derive(Debug)]
pub(super) struct AddressSlot {
    table: Arc<PerAddress>,
    address: Address,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.table.lock();
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// What an open connection holds: its place under `--max-connections` and
/// under its address's cap.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) _permit: OwnedSemaphorePermit,
    pub(super) _address: AddressSlot,
}
