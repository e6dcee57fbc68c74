//! The stores and leadership: SQLite and a real PostgreSQL server, copying a
//! store, the standby and its takeover, failover under load, teammates that
//! follow the leader, injected faults and chaos.
//!
//! One test binary (`cargo test -p mesh-tests --test stores`), each module linked once.

mod chaos;
mod failover;
mod faults;
mod follow_leader;
mod standby;
mod store_copy;
mod stores;
