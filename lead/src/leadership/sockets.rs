//! The listening sockets, kept open across a step-down: duplicates that
//! [`super::step_down`] hands to the process it starts (named in the
//! environment), so calls and page loads that arrive meanwhile wait in the
//! backlog instead of being refused, and the console keeps its port.

use std::{
    os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd},
    sync::Mutex,
};

use tokio::net::TcpListener;

/// A listening socket a lead hands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Socket {
    /// gRPC.
    Grpc,
    /// The console.
    Console,
}

impl Socket {
    /// The variable naming the inherited socket's descriptor.
    fn var(self) -> &'static str {
        match self {
            Socket::Grpc => "MESH_LISTEN_FD",
            Socket::Console => "MESH_CONSOLE_FD",
        }
    }
}

/// The sockets kept for a step-down.
static KEPT: Mutex<Vec<(Socket, OwnedFd)>> = Mutex::new(Vec::new());

/// Keeps `listener`'s socket for a step-down.
pub fn keep(socket: Socket, listener: &TcpListener) -> std::io::Result<()> {
    let copy = listener.as_fd().try_clone_to_owned()?;
    if let Ok(mut kept) = KEPT.lock() {
        kept.retain(|(s, _)| *s != socket);
        kept.push((socket, copy));
    }
    Ok(())
}

/// The socket a lead that stepped down handed on, if this process is that
/// lead started again.
pub fn inherited(socket: Socket) -> Option<std::net::TcpListener> {
    let fd: i32 = std::env::var(socket.var()).ok()?.parse().ok()?;
    std::env::remove_var(socket.var());
    // SAFETY: the lead that stepped down put this descriptor, a listening
    // TCP socket, here for this process alone, and named it in the variable.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // Not for the children this lead will start.
    let _ = nix::fcntl::fcntl(
        &owned,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
    let listener = std::net::TcpListener::from(owned);
    listener.set_nonblocking(true).ok()?;
    Some(listener)
}

/// Lets every kept socket cross the exec of `command` (only), named in its
/// environment.
pub(super) fn hand_on(command: &mut std::process::Command) {
    let Ok(kept) = KEPT.lock() else { return };
    for (socket, fd) in kept.iter() {
        if nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
        )
        .is_ok()
        {
            command.env(socket.var(), fd.as_raw_fd().to_string());
        }
    }
}
