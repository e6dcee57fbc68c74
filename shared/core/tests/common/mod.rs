//! What the core's team tests share: a caller admitted as the lead's hub
//! admits it.

use mesh_core::access::{self, Admitted, Call, Caller};

/// `caller`, let in at the door its kind calls (the lead's hub admits
/// callers; the team trusts what it admitted).
pub(crate) fn admitted(caller: Caller) -> Admitted {
    let call = match &caller {
        Caller::Operator(person) => Call::Operator(person.role),
        Caller::Lead => Call::Lead,
        Caller::Joiner => Call::Join,
        _ => Call::Teammate(""),
    };
    access::admit(caller, call).unwrap()
}
