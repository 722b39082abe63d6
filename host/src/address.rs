//! Actor paths and addresses: `/user/a/b`, relative selection, name rules.
//!
//! A path is absolute, starts at one of the two roots (`/user`, `/system`) and is a list of names.
//! A name is 1-255 characters from `[A-Za-z0-9_.~:@+=-]`, and neither `.` nor `..`; in particular it
//! never holds a `/`. Relative paths (`child/grandchild`, `../sibling`) are resolved against an
//! actor's own path.

use std::fmt;
use std::sync::Arc;

use crate::error::AddressError;

/// The root of the user tree.
pub const USER_ROOT: &str = "/user";
/// The root of the host's own tree.
pub const SYSTEM_ROOT: &str = "/system";

/// A validated absolute actor path such as `/user/ping`. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActorPath(Arc<str>);

/// Where an actor lives and which incarnation of it: a restarted actor keeps both, a new actor at the
/// same path after a stop gets a new incarnation.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Address {
    /// The absolute path.
    pub path: ActorPath,
    /// The incarnation id, unique within one host run.
    pub incarnation: u64,
}

/// Checks one actor name (a single path segment).
pub fn validate_name(name: &str) -> Result<(), AddressError> {
    let bad = |why: &str| Err(AddressError::InvalidName(name.to_owned(), why.to_owned()));
    if name.is_empty() {
        return bad("a name cannot be empty");
    }
    if name.len() > 255 {
        return bad("a name is at most 255 bytes");
    }
    if name == "." || name == ".." {
        return bad("`.` and `..` are not names");
    }
    // One pass over the bytes: every allowed character is ASCII, so the first byte that is
    // not allowed starts the character to name (this runs on every send from outside).
    let allowed = |b: &u8| {
        b.is_ascii_alphanumeric()
            || matches!(b, b'_' | b'.' | b'~' | b':' | b'@' | b'+' | b'=' | b'-')
    };
    if let Some(at) = name.bytes().position(|b| !allowed(&b)) {
        let c = name[at..].chars().next().unwrap_or_default();
        if c == '/' {
            return bad("a name cannot contain `/`");
        }
        return Err(AddressError::InvalidName(
            name.to_owned(),
            format!("character {c:?} is not allowed (use A-Z a-z 0-9 _ . ~ : @ + = -)"),
        ));
    }
    Ok(())
}

impl ActorPath {
    /// Parses an absolute path; it must start with `/user` or `/system`.
    pub fn parse(path: &str) -> Result<Self, AddressError> {
        Self::check(path)?;
        Ok(ActorPath(Arc::from(path)))
    }

    /// Checks an absolute path without allocating (the send hot path).
    pub fn check(path: &str) -> Result<(), AddressError> {
        let Some(rest) = path.strip_prefix('/') else {
            return Err(AddressError::NotAbsolute(path.to_owned()));
        };
        let mut segments = rest.split('/');
        match segments.next() {
            Some("user") | Some("system") => {}
            _ => return Err(AddressError::UnknownRoot(path.to_owned())),
        }
        for segment in segments {
            validate_name(segment).map_err(|e| e.in_path(path))?;
        }
        Ok(())
    }

    /// The root `/user`.
    pub fn user_root() -> Self {
        ActorPath(Arc::from(USER_ROOT))
    }

    /// The root `/system`.
    pub fn system_root() -> Self {
        ActorPath(Arc::from(SYSTEM_ROOT))
    }

    /// The path as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The last segment: the actor's name (`ping` for `/user/ping`).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// Whether this is one of the two roots, which are not actors.
    pub fn is_root(&self) -> bool {
        self.depth() == 0
    }

    /// The number of names below the root (`/user/a/b` has depth 2).
    pub fn depth(&self) -> usize {
        self.0.matches('/').count() - 1
    }

    /// The parent path, `None` for a root.
    pub fn parent(&self) -> Option<ActorPath> {
        if self.is_root() {
            return None;
        }
        let cut = self.0.rfind('/')?;
        Some(ActorPath(Arc::from(&self.0[..cut])))
    }

    /// The path of a child with the given name.
    pub fn child(&self, name: &str) -> Result<ActorPath, AddressError> {
        validate_name(name)?;
        Ok(ActorPath(Arc::from(format!("{}/{name}", self.0))))
    }

    /// Whether `self` lies strictly below `ancestor`.
    pub fn is_descendant_of(&self, ancestor: &ActorPath) -> bool {
        self.0.len() > ancestor.0.len()
            && self.0.starts_with(&*ancestor.0)
            && self.0.as_bytes()[ancestor.0.len()] == b'/'
    }

    /// Resolves an absolute path, or a relative one (`child/x`, `../sibling`) against `self`.
    pub fn select(&self, target: &str) -> Result<ActorPath, AddressError> {
        if target.starts_with('/') {
            return ActorPath::parse(target);
        }
        if target.is_empty() {
            return Err(AddressError::InvalidName(
                String::new(),
                "a relative path cannot be empty".to_owned(),
            ));
        }
        let mut current = self.clone();
        for segment in target.split('/') {
            current = match segment {
                ".." => current
                    .parent()
                    .ok_or_else(|| AddressError::AboveRoot(target.to_owned()))?,
                "." => current,
                name => current.child(name).map_err(|e| e.in_path(target))?,
            };
        }
        Ok(current)
    }
}

impl fmt::Display for ActorPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ActorPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.path, self.incarnation)
    }
}

/// The address of incarnation `incarnation` at `path`, for a unit test.
#[cfg(test)]
pub(crate) fn at(path: &str, incarnation: u64) -> Address {
    Address {
        path: ActorPath::parse(path).expect("a test path"),
        incarnation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_absolute_paths_under_the_two_roots() {
        assert_eq!(ActorPath::parse("/user/a/b").unwrap().as_str(), "/user/a/b");
        assert!(ActorPath::parse("/system/deadletters").is_ok());
        assert!(ActorPath::parse("/user").unwrap().is_root());
        assert!(matches!(
            ActorPath::parse("user/a"),
            Err(AddressError::NotAbsolute(_))
        ));
        assert!(matches!(
            ActorPath::parse("/other/a"),
            Err(AddressError::UnknownRoot(_))
        ));
        assert!(ActorPath::parse("/user/a//b").is_err());
        assert!(ActorPath::parse("/user/a/").is_err());
    }

    #[test]
    fn names_with_slash_or_odd_characters_are_rejected() {
        assert!(validate_name("worker-1").is_ok());
        assert!(validate_name("a/b").is_err());
        assert!(validate_name("").is_err());
        assert!(validate_name("..").is_err());
        assert!(validate_name("a b").is_err());
        assert!(validate_name(&"x".repeat(256)).is_err());
        assert!(
            validate_name("A-z_0.9~:@+=").is_ok(),
            "every allowed character"
        );
        let says = |name: &str| validate_name(name).unwrap_err().to_string();
        assert!(
            says("a/b").contains("cannot contain `/`"),
            "{}",
            says("a/b")
        );
        assert!(
            says("caf\u{e9}").contains("'\u{e9}' is not allowed"),
            "{}",
            says("caf\u{e9}")
        );
        assert!(says("a*").contains("'*' is not allowed"), "{}", says("a*"));
    }

    #[test]
    fn relative_selection_resolves_against_the_actor() {
        let me = ActorPath::parse("/user/a/b").unwrap();
        assert_eq!(me.select("../c").unwrap().as_str(), "/user/a/c");
        assert_eq!(
            me.select("child/grandchild").unwrap().as_str(),
            "/user/a/b/child/grandchild"
        );
        assert_eq!(me.select("../../x").unwrap().as_str(), "/user/x");
        assert_eq!(
            me.select("/system/deadletters").unwrap().as_str(),
            "/system/deadletters"
        );
        assert!(me.select("../../../../x").is_err());
        assert!(me.select("bad name").is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// A valid name: 1-20 characters of the allowed set, never `.` or `..`.
        fn name() -> impl Strategy<Value = String> {
            "[A-Za-z0-9_.~:@+=-]{1,20}".prop_filter("not . or ..", |n| n != "." && n != "..")
        }

        proptest! {
            /// Parsing never panics, and `check` agrees with `parse`.
            #[test]
            fn any_string_is_parsed_or_refused_without_panic(text in ".{0,64}") {
                prop_assert_eq!(ActorPath::check(&text).is_ok(), ActorPath::parse(&text).is_ok());
            }

            /// A path built from valid names parses back to itself, and its parent and last
            /// name are the ones it was built from.
            #[test]
            fn built_paths_round_trip(
                user in any::<bool>(),
                names in proptest::collection::vec(name(), 1..6),
            ) {
                let mut path = if user { ActorPath::user_root() } else { ActorPath::system_root() };
                for n in &names {
                    let child = path.child(n).unwrap();
                    prop_assert_eq!(child.parent(), Some(path.clone()));
                    prop_assert!(child.is_descendant_of(&path));
                    path = child;
                }
                prop_assert_eq!(ActorPath::parse(path.as_str()).unwrap(), path.clone());
                prop_assert_eq!(path.name(), names.last().unwrap().as_str());
                prop_assert_eq!(path.depth(), names.len());
            }

            /// A name with a character outside the set (or a slash) is refused, alone and
            /// inside a path.
            #[test]
            fn a_bad_character_is_refused_everywhere(
                prefix in name(),
                bad in "[^A-Za-z0-9_.~:@+=-]",
            ) {
                let bad_name = format!("{prefix}{bad}");
                prop_assert!(validate_name(&bad_name).is_err());
                let path = format!("/user/{bad_name}");
                prop_assert!(ActorPath::parse(&path).is_err());
            }

            /// Relative selection: `..` then a name is a sibling; a child then `..` is back.
            #[test]
            fn relative_selection_climbs_and_descends(a in name(), b in name(), c in name()) {
                let me = ActorPath::user_root().child(&a).unwrap().child(&b).unwrap();
                let sibling = me.select(&format!("../{c}")).unwrap();
                prop_assert_eq!(sibling.parent(), me.parent());
                prop_assert_eq!(me.select(&format!("{c}/..")).unwrap(), me.clone());
                prop_assert!(me.select("../../..").is_err(), "climbs above /user");
            }
        }
    }

    #[test]
    fn family_relations() {
        let a = ActorPath::parse("/user/a").unwrap();
        let ab = ActorPath::parse("/user/a/b").unwrap();
        let abc = ActorPath::parse("/user/abc").unwrap();
        assert!(ab.is_descendant_of(&a));
        assert!(!abc.is_descendant_of(&a));
        assert!(!a.is_descendant_of(&a));
        assert_eq!(ab.parent().unwrap(), a);
        assert_eq!(ab.name(), "b");
        assert_eq!(a.parent().unwrap(), ActorPath::user_root());
        assert_eq!(ActorPath::user_root().parent(), None);
    }
}
