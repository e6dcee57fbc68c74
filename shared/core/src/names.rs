//! Member names and request ids: the two identifiers every protocol message
//! carries, validated once at the boundary.

use std::fmt;

use crate::error::FieldError;

/// The name the lead answers to, in `from`/`to` and as the target of plan and
/// permission requests.
pub const LEAD: &str = "lead";
/// `Send` to this name reaches every other active member.
pub const EVERYONE: &str = "*";

/// A member name: `^[a-z0-9][a-z0-9_-]{0,63}$`. Not `lead`, which is the lead's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// Validates `value` as the field `field` of a request.
    pub fn parse(field: &str, value: &str) -> Result<Self, FieldError> {
        let mut chars = value.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let rest_ok =
            chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if value.is_empty() {
            return Err(FieldError::new(field, "is required"));
        }
        if !first_ok || !rest_ok || value.len() > 64 {
            return Err(FieldError::new(
                field,
                format!(
                    "{:?} does not match ^[a-z0-9][a-z0-9_-]{{0,63}}$",
                    crate::limits::cut(value, 80)
                ),
            ));
        }
        if value == LEAD {
            return Err(FieldError::new(field, "\"lead\" is reserved for the lead"));
        }
        Ok(Self(value.to_owned()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A request id: chosen by the sender (a UUID) or made by the lead.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(String);

impl RequestId {
    /// A fresh random (v4) UUID.
    pub fn generate() -> Self {
        Self(canonical(uuid::Uuid::new_v4()))
    }

    /// An id a client chose for a new request: empty means "make one"; anything
    /// else must be a UUID, in any spelling `uuid` parses (braces, upper case,
    /// `urn:uuid:`), kept in its canonical form (lower case, hyphenated), so
    /// that two spellings of one UUID are one request.
    pub fn for_new(field: &str, value: &str) -> Result<Self, FieldError> {
        if value.is_empty() {
            return Ok(Self::generate());
        }
        crate::limits::check(field, value, crate::limits::ID)?;
        uuid::Uuid::parse_str(value)
            .map(|uuid| Self(canonical(uuid)))
            .map_err(|_| FieldError::new(field, format!("{value:?} is not a UUID")))
    }

    /// An id that names an existing request: a UUID in its canonical form,
    /// anything else as it is. Only emptiness and length are refused here, so
    /// that an unknown id answers NOT_FOUND, not INVALID_ARGUMENT.
    pub fn existing(field: &str, value: &str) -> Result<Self, FieldError> {
        if value.is_empty() {
            return Err(FieldError::new(field, "is required"));
        }
        crate::limits::check(field, value, crate::limits::ID)?;
        Ok(match uuid::Uuid::parse_str(value) {
            Ok(uuid) => Self(canonical(uuid)),
            Err(_) => Self(value.to_owned()),
        })
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `uuid` lower case and hyphenated, written straight into its string
/// (not through `Display`'s formatting machinery: every request pays it).
fn canonical(uuid: uuid::Uuid) -> String {
    uuid.hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract_pattern() {
        for ok in ["a", "alice", "0", "bob-2", "x_y", &"a".repeat(64)] {
            assert!(Name::parse("name", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Alice",
            "-a",
            "_a",
            "a b",
            "a.b",
            "é",
            &"a".repeat(65),
            "lead",
        ] {
            let err = Name::parse("name", bad).expect_err(bad);
            assert_eq!(err.field, "name");
        }
    }

    #[test]
    fn request_ids_are_uuids_or_generated() {
        assert!(RequestId::for_new("request_id", "").is_ok());
        let id = "2f1c0e9a-7d2b-4c1e-9a4b-3f9d8e7c6b5a";
        assert_eq!(
            RequestId::for_new("request_id", id).map(|r| r.0),
            Ok(id.to_owned())
        );
        assert!(RequestId::for_new("request_id", "abc").is_err());
        assert!(RequestId::existing("request_id", "").is_err());
        assert!(RequestId::existing("request_id", "anything").is_ok());
        let upper = "2F1C0E9A-7D2B-4C1E-9A4B-3F9D8E7C6B5A";
        for spelling in [
            upper.to_owned(),
            format!("{{{id}}}"),
            format!("urn:uuid:{id}"),
            id.replace('-', ""),
        ] {
            assert_eq!(
                RequestId::for_new("request_id", &spelling).map(|r| r.0),
                Ok(id.to_owned()),
                "{spelling}"
            );
            assert_eq!(
                RequestId::existing("request_id", &spelling).map(|r| r.0),
                Ok(id.to_owned())
            );
        }
    }
}
