//! The tree itself, checked without starting anything: the layout page names
//! every file, the README stays short, links lead somewhere, and files and
//! functions stay within their caps.
//!
//! One test binary (`cargo test -p mesh-tests --test source`), each module linked once.

mod layout;
mod sizes;
