//! What a component must be to be deployed: a component (not a core module), built against a
//! compatible `mote:actor` contract, importing only what the host grants it, and under a
//! well-formed name and version.

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::actor::pull;
use crate::caps::Caps;
use crate::error::ModuleError;

/// The `mote:actor` contract version this host provides.
pub const CONTRACT_VERSION: &str = "0.2.0";
/// The export every actor must provide.
pub(crate) const ACTOR_EXPORT: &str = "mote:actor/actor@0.2.0";
/// The optional export through which a parent decides about failed children.
pub(crate) const SUPERVISOR_EXPORT: &str = "mote:actor/supervisor@0.2.0";
/// The optional export through which an actor carries its state across an upgrade.
pub(crate) const UPGRADE_EXPORT: &str = "mote:actor/upgrade@0.2.0";
/// The optional export of `receive` with the message packed into one list.
pub(crate) const PACKED_RECEIVE_EXPORT: &str = "mote:actor/packed-receive@0.2.0";
/// The interface through which an actor reads its clocks (any 0.2 version).
pub(crate) const CLOCK_IMPORT: &str = "mote:actor/clock@";

/// Checks a module name or version: 1-64 characters from `A-Z a-z 0-9 _ - .`, not starting
/// with `.`.
pub(crate) fn validate_name(what: &str, name: &str) -> Result<(), ModuleError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(ModuleError::InvalidName(format!("{what} {name}")))
    }
}

/// Refuses grants no capability of this host can give.
pub(crate) fn validate_grants(grants: &[String]) -> Result<(), ModuleError> {
    let mut grantable = Caps::grantable();
    grantable.push(SNAPSHOT_GRANT);
    match grants.iter().find(|g| !grantable.contains(&g.as_str())) {
        Some(unknown) => Err(ModuleError::UnknownGrant {
            grant: unknown.clone(),
            grantable: grantable.iter().map(|g| (*g).to_owned()).collect(),
        }),
        None => Ok(()),
    }
}

/// The grant that lets the host capture a module's instances as images (`snapshot = true` in
/// a manifest): the component is instrumented with a snapshot shim that reaches its core
/// state (`sandbox::instrument`).
pub(crate) const SNAPSHOT_GRANT: &str = "snapshot";

/// SHA-256 of `bytes`, hex.
pub(crate) fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Tells a component from a core module or something else by the header alone.
pub(crate) fn check_header(name: &str, bytes: &[u8]) -> Result<(), ModuleError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(ModuleError::NotWasm {
            name: name.to_owned(),
        });
    }
    // Bytes 4..8 are version + layer: layer 0 is a core module, layer 1 a component.
    if bytes[6..8] == [0, 0] {
        return Err(ModuleError::CoreModule {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Whether a contract version a component was built against works with this host's: the same
/// major version, and for 0.x the same minor version (semver).
pub(crate) fn compatible(found: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> {
        v.split('.')
            .map(|p| p.parse().unwrap_or(u64::MAX))
            .collect()
    };
    let (found, ours) = (parts(found), parts(CONTRACT_VERSION));
    if found.len() != 3 {
        return false;
    }
    match ours[0] {
        0 => found[0] == 0 && found[1] == ours[1],
        major => found[0] == major,
    }
}

/// Refuses a component whose `mote:actor` imports or exports name another contract version.
pub(crate) fn check_contract(
    name: &str,
    component: &Component,
    engine: &Engine,
) -> Result<(), ModuleError> {
    let ty = component.component_type();
    let names = ty
        .imports(engine)
        .map(|(n, _)| n)
        .chain(ty.exports(engine).map(|(n, _)| n));
    for item in names {
        if let Some(rest) = item.strip_prefix("mote:actor/")
            && let Some((_, version)) = rest.split_once('@')
            && !compatible(version)
        {
            return Err(ModuleError::ContractVersion {
                name: name.to_owned(),
                found: version.to_owned(),
                host: CONTRACT_VERSION.to_owned(),
                item: item.to_owned(),
            });
        }
    }
    Ok(())
}

/// Refuses a component that imports an interface no capability grants it (`wasi:http` unless
/// granted, say). The pulled receive's `inbox` is the host's own, open to every module.
pub(crate) fn check_imports(
    name: &str,
    component: &Component,
    engine: &Engine,
    grants: &[String],
) -> Result<(), ModuleError> {
    for (import, _) in component.component_type().imports(engine) {
        if !import.starts_with(pull::IMPORT) && Caps::permits(import, grants).is_err() {
            return Err(ModuleError::NotGranted {
                name: name.to_owned(),
                import: import.to_owned(),
            });
        }
    }
    Ok(())
}

/// Checks that the component exports the actor interface.
pub(crate) fn check_exports(
    name: &str,
    component: &Component,
    engine: &Engine,
) -> Result<(), ModuleError> {
    let ty = component.component_type();
    if ty.get_export(engine, ACTOR_EXPORT).is_some() {
        return Ok(());
    }
    let exports: Vec<&str> = ty.exports(engine).map(|(n, _)| n).collect();
    Err(ModuleError::WrongWorld {
        name: name.to_owned(),
        reason: format!(
            "missing export `{ACTOR_EXPORT}` (it exports: {})",
            if exports.is_empty() {
                "nothing".to_owned()
            } else {
                exports.join(", ")
            }
        ),
        source: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_versions_follow_semver() {
        assert!(compatible("0.2.0"));
        assert!(compatible("0.2.7"));
        assert!(!compatible("0.1.0"), "0.1 had other types");
        assert!(!compatible("0.3.0"));
        assert!(!compatible("1.1.0"));
        assert!(!compatible("0.1"));
    }

    #[test]
    fn content_hash_is_sha256() {
        assert_eq!(
            content_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_and_versions_follow_the_rules() {
        assert!(validate_name("module", "counter-2.v1_x").is_ok());
        assert!(validate_name("module", "").is_err());
        assert!(validate_name("module", ".hidden").is_err());
        assert!(validate_name("module", "a/b").is_err());
        assert!(validate_name("module", &"x".repeat(65)).is_err());
    }

    #[test]
    fn an_unknown_grant_is_its_own_error_naming_what_can_be_granted() {
        assert!(validate_grants(&["wasi:http".to_owned()]).is_ok());
        assert!(validate_grants(&["snapshot".to_owned()]).is_ok());
        match validate_grants(&["wasi:sockets".to_owned()]) {
            Err(ModuleError::UnknownGrant { grant, grantable }) => {
                assert_eq!(grant, "wasi:sockets");
                assert_eq!(grantable, ["wasi:http", "snapshot"]);
            }
            other => panic!("expected an unknown grant, got {other:?}"),
        }
    }

    #[test]
    fn headers_tell_components_from_core_modules_and_other_files() {
        assert!(matches!(
            check_header("x", b"hello world"),
            Err(ModuleError::NotWasm { .. })
        ));
        assert!(matches!(
            check_header("x", b"\0asm\x01\0\0\0"),
            Err(ModuleError::CoreModule { .. })
        ));
        assert!(check_header("x", b"\0asm\x0d\0\x01\0").is_ok());
    }
}
