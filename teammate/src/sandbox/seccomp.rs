//! The seccomp filter a Landlock-confined command runs under: what Landlock
//! cannot say. No socket at all (so no UDP, no raw sockets, no netlink, TCP
//! twice over, and no UNIX socket, whose path Landlock does not guard before
//! ABI 9: a local service's socket stays out of reach); a connected pair
//! (`socketpair`) still works. No io_uring (its operations go around this
//! filter); no new namespaces; no tracing and no reading of other
//! processes' memory; no kernel keyrings; no BPF or perf events.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The namespace flags of `clone`.
const NAMESPACES: [libc::c_int; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWTIME,
];

/// The filters, compiled: denials (EACCES), and `clone3` answered ENOSYS so
/// that the C library falls back to `clone`, whose flags the first filter
/// can read.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    deny: BpfProgram,
    clone3: BpfProgram,
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("seccomp filter: {e}"))
}

/// Builds the filter for this machine's architecture.
pub(super) fn filter() -> std::io::Result<Filter> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(other)?;
    let condition = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(other)
    };
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut clone = Vec::new();
    for flag in NAMESPACES {
        let flag = flag as u64;
        clone.push(
            SeccompRule::new(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])
                .map_err(other)?,
        );
    }
    deny.insert(libc::SYS_clone, clone);
    for call in [
        libc::SYS_socket,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
    ] {
        deny.insert(call, Vec::new());
    }
    let compile = |rules, errno: i32| -> std::io::Result<BpfProgram> {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(other)?;
        BpfProgram::try_from(filter).map_err(other)
    };
    Ok(Filter {
        deny: compile(deny, libc::EACCES)?,
        clone3: compile(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            libc::ENOSYS,
        )?,
    })
}

/// Installs the filter on the calling thread (the command's, between fork
/// and exec), for good.
pub(super) fn apply(filter: &Filter) -> std::io::Result<()> {
    for program in [&filter.deny, &filter.clone3] {
        seccompiler::apply_filter(program).map_err(|_| std::io::Error::last_os_error())?;
    }
    Ok(())
}
