//! The modules `mote` ships inside itself: the pattern components of `mote-patterns`, deployed
//! by name (`[[module]] builtin = "throttle"`, `mote deploy --builtin patterns`).

use anyhow::{Result, bail};

/// The component of one built-in module.
pub fn component(name: &str) -> Result<&'static [u8]> {
    if name == mote_patterns::ALL {
        bail!(
            "`{name}` stands for every built-in module: name one ({}) or use `mote deploy --builtin {name}`",
            listing()
        );
    }
    match mote_patterns::component(name) {
        Some(bytes) => Ok(bytes),
        None => bail!("no built-in module {name:?} (built-ins: {})", listing()),
    }
}

/// The built-in modules `name` stands for: every one for `patterns`, else the one named.
pub fn resolve(name: &str) -> Result<Vec<(&'static str, &'static [u8])>> {
    match mote_patterns::resolve(name) {
        Some(found) => Ok(found),
        None => bail!(
            "no built-in module {name:?} (built-ins: {}, or `{}` for all)",
            listing(),
            mote_patterns::ALL
        ),
    }
}

fn listing() -> String {
    let names: Vec<&str> = mote_patterns::names().collect();
    if names.is_empty() {
        "none: this mote was built without its guests (MOTE_SKIP_GUESTS)".into()
    } else {
        names.join(", ")
    }
}
