//! Finder: spawns `<n>` counter children (`c0`..) in `start` (init: `<n>`), and answers
//! `Find::Children` with its live children and `Find::Resolve(path)` with the actor at a
//! path, both as `Found`; `Find::Alias(name)` takes an alias and answers with its path (or
//! nothing if refused). `Find::Crash` panics, so its supervisor restarts it (its children
//! are stopped, and `start` spawns new ones).

use mote_example_protocol::{Find, Found, init_opt, init_words};
use mote_guest::{Actor, Address, Context, Result};

struct Finder;

fn found(addresses: impl IntoIterator<Item = Address>) -> Found {
    Found(
        addresses
            .into_iter()
            .map(|a| (a.path, a.incarnation))
            .collect(),
    )
}

impl Actor for Finder {
    type Msg = Find;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let n: u32 = init_opt(&init_words(init), 0, "children")?.unwrap_or(0);
        for i in 0..n {
            ctx.spawn(&format!("c{i}"), "counter", b"")?;
        }
        Ok(Finder)
    }

    fn receive(&mut self, ctx: &mut Context, msg: Find) -> Result<()> {
        match msg {
            Find::Children => ctx.reply(&found(ctx.children())),
            Find::Resolve(path) => ctx.reply(&found(ctx.resolve(&path))),
            Find::Crash => panic!("asked to crash"),
            Find::Alias(name) => {
                let alias = ctx.alias(&name).ok().map(|path| (path, 0));
                ctx.reply(&Found(alias.into_iter().collect()))
            }
        }
    }
}

mote_guest::export_actor!(Finder);
