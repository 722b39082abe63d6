//! Ping-pong (Dust §2.8): two actors from this one module bounce a ball `rounds` times.
//!
//! The role comes from the init words:
//! - `pong [R]`: answers each `Ping(n)` with `Pong(n)`; on `Done` logs how many pings it got,
//!   reports them to `R` as `pings` and stops.
//! - `ping <peer-path> <rounds> [R]`: sends `Ping(1)` to the peer at start and `Ping(n + 1)`
//!   for each `Pong(n)` until `n` reaches `rounds`; then sends `Done` to the peer, logs, reports
//!   its pongs to `R` as `pongs` and stops. With `rounds` 0 it sends `Done` straight away.

use mote_example_protocol::{PingPong, init_arg, init_opt, init_words, report};
use mote_guest::{Actor, Context, Error, Result};

/// Round counts up to this log every ball at debug level.
const VERBOSE_ROUNDS: u32 = 10;

/// Which side of the game this actor plays.
enum Role {
    /// Answers pings.
    Pong,
    /// Serves `rounds` pings to the actor at `peer`.
    Ping { peer: String, rounds: u32 },
}

/// A player: its role, the balls it received and where to report.
struct Player {
    role: Role,
    count: u64,
    report_to: Option<String>,
}

impl Player {
    /// Ends the pinger's game: `Done` to the peer, a log line, the report, and stop.
    fn finish(&self, ctx: &Context, peer: &str) -> Result<()> {
        ctx.tell_path(peer, &PingPong::Done)?;
        ctx.info(&format!("ping: {} round trips done", self.count));
        report(ctx, self.report_to.as_deref(), "pongs", self.count)?;
        ctx.stop_self();
        Ok(())
    }
}

impl Actor for Player {
    type Msg = PingPong;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        match words.first().copied() {
            Some("pong") => Ok(Self {
                role: Role::Pong,
                count: 0,
                report_to: init_opt(&words, 1, "report-path")?,
            }),
            Some("ping") => {
                let peer: String = init_arg(&words, 1, "peer-path")?;
                let rounds: u32 = init_arg(&words, 2, "rounds")?;
                let player = Self {
                    role: Role::Ping {
                        peer: peer.clone(),
                        rounds,
                    },
                    count: 0,
                    report_to: init_opt(&words, 3, "report-path")?,
                };
                ctx.info(&format!("ping: starting {rounds} rounds with {peer}"));
                if rounds == 0 {
                    player.finish(ctx, &peer)?;
                } else {
                    ctx.tell_path(&peer, &PingPong::Ping(1))?;
                }
                Ok(player)
            }
            other => Err(Error::msg(format!(
                "init must start with `ping` or `pong`, got {other:?}"
            ))),
        }
    }

    fn receive(&mut self, ctx: &mut Context, msg: PingPong) -> Result<()> {
        match (&self.role, msg) {
            (Role::Pong, PingPong::Ping(n)) => {
                self.count += 1;
                ctx.reply(&PingPong::Pong(n))
            }
            (Role::Pong, PingPong::Done) => {
                ctx.info(&format!("pong: received {} pings", self.count));
                report(ctx, self.report_to.as_deref(), "pings", self.count)?;
                ctx.stop_self();
                Ok(())
            }
            (Role::Ping { peer, rounds }, PingPong::Pong(n)) => {
                self.count += 1;
                if *rounds <= VERBOSE_ROUNDS {
                    ctx.debug(&format!("ping: pong {n} of {rounds}"));
                }
                if n < *rounds {
                    ctx.reply(&PingPong::Ping(n + 1))
                } else {
                    let peer = peer.clone();
                    self.finish(ctx, &peer)
                }
            }
            (_, msg) => {
                ctx.warn(&format!("ignoring {msg:?}, which is not for this role"));
                Ok(())
            }
        }
    }
}

mote_guest::export_actor!(Player);
