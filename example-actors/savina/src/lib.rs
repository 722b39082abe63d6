//! Savina-style workload actors for `mote-bench` (and the same workloads in Erlang in
//! `bench/peers/savina.erl`). The role comes from the init words:
//! - `relay <next-path> [R]`: passes `Token(n)` on to `<next-path>` as `Token(n - 1)`; the actor
//!   that gets `Token(0)` reports `token` to `R`. A closed ring of these is the thread ring; an
//!   open line ending at a probe is the chain.
//! - `echo`: answers each `Ping` with `Pong` (fork-join).
//! - `big <index> <actors> <pings> [R]`: one of the mesh `/user/big-0`..`/user/big-{actors-1}`.
//!   On `Start` it pings a random other member, and on each `Pong` the next one, until it has
//!   had `pings` answers; it then reports `big` to `R`. It answers every `Ping` with `Pong`.

use mote_example_protocol::{Savina, init_arg, init_opt, init_words, report};
use mote_guest::{Actor, Context, Error, Result};

/// What this actor does with the messages.
enum Role {
    Relay {
        next: String,
    },
    Echo,
    Big {
        index: u64,
        actors: u64,
        pings: u64,
        answered: u64,
        /// A xorshift state: the mesh's choice of peers needs no good randomness.
        seed: u64,
    },
}

struct Worker {
    role: Role,
    report_to: Option<String>,
}

impl Worker {
    /// Pings a random member of the mesh other than itself.
    fn ping_someone(ctx: &Context, index: u64, actors: u64, seed: &mut u64) -> Result<()> {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let mut peer = *seed % actors;
        if peer == index {
            peer = (peer + 1) % actors;
        }
        ctx.tell_path(&format!("/user/big-{peer}"), &Savina::Ping)
    }
}

impl Actor for Worker {
    type Msg = Savina;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let (role, report_at) = match words.first().copied() {
            Some("relay") => (
                Role::Relay {
                    next: init_arg(&words, 1, "next-path")?,
                },
                2,
            ),
            Some("echo") => (Role::Echo, 1),
            Some("big") => {
                let index: u64 = init_arg(&words, 1, "index")?;
                let actors: u64 = init_arg(&words, 2, "actors")?;
                if actors < 2 || index >= actors {
                    return Err(Error::msg(
                        "big: needs two actors or more and index < actors",
                    ));
                }
                let role = Role::Big {
                    index,
                    actors,
                    pings: init_arg(&words, 3, "pings")?,
                    answered: 0,
                    seed: 0x9E37_79B9_7F4A_7C15 ^ (index + 1),
                };
                (role, 4)
            }
            _ => {
                return Err(Error::msg(
                    "init: relay <next> [R] | echo | big <i> <n> <pings> [R]",
                ));
            }
        };
        Ok(Worker {
            role,
            report_to: init_opt(&words, report_at, "report-path")?,
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Savina) -> Result<()> {
        match (&mut self.role, msg) {
            (Role::Relay { .. }, Savina::Token(0)) => {
                report(ctx, self.report_to.as_deref(), "token", 0)
            }
            (Role::Relay { next }, Savina::Token(n)) => ctx.tell_path(next, &Savina::Token(n - 1)),
            (_, Savina::Ping) => ctx.reply(&Savina::Pong),
            (
                Role::Big {
                    index,
                    actors,
                    seed,
                    ..
                },
                Savina::Start,
            ) => Self::ping_someone(ctx, *index, *actors, seed),
            (
                Role::Big {
                    index,
                    actors,
                    pings,
                    answered,
                    seed,
                },
                Savina::Pong,
            ) => {
                *answered += 1;
                if *answered < *pings {
                    Self::ping_someone(ctx, *index, *actors, seed)
                } else {
                    report(ctx, self.report_to.as_deref(), "big", *answered)
                }
            }
            (_, other) => Err(Error::msg(format!("unexpected {other:?} for this role"))),
        }
    }
}

mote_guest::export_actor!(Worker);
