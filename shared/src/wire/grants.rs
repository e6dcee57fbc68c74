//! Permission modes and grants on the wire, a grant validated on its way in.

use crate::pb;
use mesh_core::{
    error::FieldError,
    grant::{Grant, Mode},
};
use prost::UnknownEnumValue;

use super::ToPb;

impl ToPb for Mode {
    type Pb = pb::PermissionMode;
    fn to_pb(&self) -> pb::PermissionMode {
        match self {
            Mode::Plan => pb::PermissionMode::Plan,
            Mode::Default => pb::PermissionMode::Default,
            Mode::AcceptEdits => pb::PermissionMode::AcceptEdits,
            Mode::Bypass => pb::PermissionMode::Bypass,
        }
    }
}

/// [`Mode`] from the wire: UNSPECIFIED is no mode (an error of 0); where it
/// stands for a default, see [`mode_from_pb`].
impl TryFrom<pb::PermissionMode> for Mode {
    type Error = UnknownEnumValue;
    fn try_from(value: pb::PermissionMode) -> Result<Self, UnknownEnumValue> {
        match value {
            pb::PermissionMode::Plan => Ok(Mode::Plan),
            pb::PermissionMode::Default => Ok(Mode::Default),
            pb::PermissionMode::AcceptEdits => Ok(Mode::AcceptEdits),
            pb::PermissionMode::Bypass => Ok(Mode::Bypass),
            pb::PermissionMode::Unspecified => Err(UnknownEnumValue(value as i32)),
        }
    }
}

/// A mode's number from the wire: UNSPECIFIED is `None`; an unknown number
/// an error naming `field`.
pub fn mode_from_pb(field: &str, value: i32) -> Result<Option<Mode>, FieldError> {
    match pb::PermissionMode::try_from(value) {
        Ok(pb::PermissionMode::Unspecified) => Ok(None),
        known => known
            .and_then(Mode::try_from)
            .map(Some)
            .map_err(|_| FieldError::new(field, format!("{value} is not a PermissionMode"))),
    }
}

impl ToPb for Grant {
    type Pb = pb::PermissionGrant;
    fn to_pb(&self) -> pb::PermissionGrant {
        pb::PermissionGrant {
            mode: self.mode.to_pb() as i32,
            write_paths: self.write_paths.clone(),
            expires_at_unix_ms: self.expires_at_unix_ms.unwrap_or(0),
        }
    }
}

/// [`Grant`] from the wire (a `grant` field), validated: an UNSPECIFIED mode
/// is accept-edits, what an approval grants.
impl TryFrom<&pb::PermissionGrant> for Grant {
    type Error = FieldError;
    fn try_from(grant: &pb::PermissionGrant) -> Result<Self, FieldError> {
        let field = "grant";
        let mode = mode_from_pb(&format!("{field}.mode"), grant.mode)?.unwrap_or(Mode::AcceptEdits);
        let expires = match grant.expires_at_unix_ms {
            0 => None,
            at => Some(at),
        };
        Grant::checked(field, mode, grant.write_paths.clone(), expires)
    }
}
