//! The Dust idioms as ready-made actor components, embedded in the `mote` binary: deploy one
//! by name (`[[module]] builtin = "throttle"`, `mote deploy --builtin patterns`) and speak its
//! JSON protocol from an actor in any language (the Rust SDK's `mote_guest::patterns` has the
//! typed messages). Each component's source and schema is in `example-actors/patterns/<name>`.

/// The name that stands for every pattern component at once (`mote deploy --builtin patterns`).
pub const ALL: &str = "patterns";

/// Every embedded component, by module name, sorted.
static COMPONENTS: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/components.rs"));

/// The bytes of the pattern component `name`, if this build embeds it.
pub fn component(name: &str) -> Option<&'static [u8]> {
    COMPONENTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// The names of the embedded components, sorted.
pub fn names() -> impl Iterator<Item = &'static str> {
    COMPONENTS.iter().map(|(name, _)| *name)
}

/// The components `name` stands for: all of them for [`ALL`], else the one of that name.
pub fn resolve(name: &str) -> Option<Vec<(&'static str, &'static [u8])>> {
    if name == ALL {
        return (!COMPONENTS.is_empty()).then(|| COMPONENTS.to_vec());
    }
    COMPONENTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|entry| vec![*entry])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_is_a_wasm_component_and_all_names_them_all() {
        let all = resolve(ALL).expect("this build embeds the pattern components");
        assert_eq!(all.len(), names().count());
        for (name, bytes) in all {
            // The component-model preamble: magic, then version 0x0d and layer 1.
            assert_eq!(
                &bytes[..8],
                b"\0asm\x0d\0\x01\0",
                "{name} is not a component"
            );
            assert_eq!(component(name), Some(bytes));
        }
        assert!(component("no-such-pattern").is_none());
        assert!(resolve("no-such-pattern").is_none());
    }
}
