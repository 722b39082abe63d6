//! Attacker: hostile calls of the host's imports, for the isolation tests. Each attack spends
//! the actor's time on the attack itself, calling the raw imports as any adversary would, and
//! reports what the host let through and what it refused.
//!
//! Init: `<attack> <report-path> [<arg>]`. In `start` it runs the attack, then reports
//! `accepted` (how many calls went through) and `refused` (how many were refused, with the
//! first refusal's words as a `why:<text>` label of value 0):
//! - `reserved`: tell, tell-path, schedule, publish, ask, remind, forward and forward-path
//!   with kinds `mote.*`;
//! - `timers`: a 1 ms periodic timer, then one-shot timers until refused (at most <arg>);
//! - `asks`: an endless deadline, then one-minute asks until refused (at most <arg>);
//! - `subscriptions` / `groups`: subscribe to / join new names until refused (at most <arg>);
//! - `log` / `stdout`: <arg> log lines through `host.log` / stdout;
//! - `steal`: claims the persistence id <arg> (another module's), recovers it, reports how
//!   many `events` it could read, and deletes the state;
//! - `names`: a child name, a path and a topic of <arg> bytes;
//! - `bomb`: spawns two children that do the same, until refused (each refused actor
//!   reports `bomb-refused` once);
//! - `flood`: <arg> messages of 60 KB to itself while it is busy (its mailbox holds them);
//! - `big`: one message past the host's size limit, to the victim;
//! - `stop`: stops `/user/victim`, which is not its descendant;
//! - `after-stop`: stops itself, then schedules, subscribes, spawns and asks in the same call;
//! - `trap-stopping`: its `stopping` hook traps;
//! - `recurse`: recurses <arg> deep with small frames (a native stack overflow);
//! - `watches`: watches incarnations 1..=<arg> of `/user/victim` until refused;
//! - `init`: spawns a child with an init past the message limit;
//! - `aliases`: takes aliases `a0`, `a1`... until refused (at most <arg>);
//! - `long-log`: <arg> log lines of 1 MiB each;
//! - `reminders`: recovers, then reminders until refused (at most <arg>);
//! - `urgent`: <arg> urgent messages to `/user/victim` (`Counter::Add(0)`, which changes
//!   nothing), on the lane served before its ordinary messages.
//! - `reply-next`: `inbox.reply-next` in `start`, where there is no message to reply to.
//!
//! A `Report` labelled `reply-next` sent to it later makes it call `inbox.reply-next` inside
//! that message: with a `mote.*` kind, a body past the size limit and a kind past the name
//! limit (each to be refused), then with a `Report` labelled `answer` of value 42; then it
//! reports its tally as for an attack.

use mote_example_protocol::{Report, init_arg, init_opt, init_words};
use mote_guest::bindings::mote::actor::types::{Address, LogLevel};
use mote_guest::bindings::mote::actor::{
    forwarding, host, inbox, messaging, naming, persistence, priority, supervision, timers,
};
use mote_guest::{Actor, Context, Message, Result};

/// What an attack let through and what it was refused.
#[derive(Default)]
struct Tally {
    accepted: u64,
    refused: u64,
    why: Option<String>,
}

impl Tally {
    fn record<T, E: core::fmt::Debug>(&mut self, outcome: core::result::Result<T, E>) -> bool {
        match outcome {
            Ok(_) => {
                self.accepted += 1;
                true
            }
            Err(e) => {
                self.refused += 1;
                self.why.get_or_insert_with(|| format!("{e:?}"));
                false
            }
        }
    }
}

/// Runs until stopped; all of its work is the attack in `start` (and, for `trap-stopping`,
/// in `stopping`).
struct Attacker {
    trap_in_stopping: bool,
}

/// Where reports go: the second init word of this actor (kept for the `bomb`'s children).
fn report_to() -> String {
    REPORT_TO.with(|r| r.borrow().clone())
}

/// Whether this is the attack's first actor, not one of its children.
fn is_top() -> bool {
    host::self_address().path == "/user/attacker"
}

std::thread_local! {
    static REPORT_TO: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn report(to: &str, label: &str, value: u64) {
    let report = Report {
        from: host::self_address().path,
        label: label.to_string(),
        value,
    };
    let body = mote_guest::encode(&report).unwrap_or_default();
    let _ = host::tell_path(to, Report::KIND, &body);
}

/// Reports what went through and what was refused (with the first refusal's words), then
/// `done`.
fn report_tally(to: &str, tally: Tally) {
    report(to, "accepted", tally.accepted);
    report(to, "refused", tally.refused);
    if let Some(why) = tally.why {
        report(to, &format!("why:{why}"), 0);
    }
    report(to, "done", 0);
}

fn attack(name: &str, arg: u64) -> Tally {
    let me = host::self_address();
    let mut tally = Tally::default();
    match name {
        "reserved" => {
            let victim = Address {
                path: "/user/victim".into(),
                incarnation: 0,
            };
            tally.record(host::tell(&victim, "mote.terminated", &[]));
            tally.record(host::tell_path("/user/victim", "mote.ask-timeout", &[]));
            tally.record(timers::schedule(&victim, "mote.terminated", &[], 1, None));
            tally.record(messaging::publish("t", "mote.deadletter", &[]));
            tally.record(messaging::ask(&victim, "mote.x", &[], 1000));
            tally.record(persistence::remind("mote.terminated", &[], 1, None));
            tally.record(forwarding::forward(&victim, "mote.terminated", &[]));
            tally.record(forwarding::forward_path("/user/victim", "mote.x", &[]));
        }
        "timers" => {
            tally.record(timers::schedule(&me, "Tick", &[], 1, Some(1)));
            for _ in 0..arg {
                if !tally.record(timers::schedule(&me, "Tick", &[], 3_600_000, None)) {
                    break;
                }
            }
        }
        "asks" => {
            let nobody = Address {
                path: "/user/nobody".into(),
                incarnation: 0,
            };
            tally.record(messaging::ask(&nobody, "Q", &[], u64::MAX / 2));
            for _ in 0..arg {
                if !tally.record(messaging::ask(&nobody, "Q", &[], 60_000)) {
                    break;
                }
            }
        }
        "subscriptions" => {
            for i in 0..arg {
                if !tally.record(messaging::subscribe(&format!("topic-{i}"))) {
                    break;
                }
            }
        }
        "groups" => {
            for i in 0..arg {
                if !tally.record(messaging::join(&format!("group-{i}"))) {
                    break;
                }
            }
        }
        "log" => {
            for i in 0..arg {
                host::log(
                    LogLevel::Error,
                    &format!("flood line {i} {}", "x".repeat(100)),
                );
                tally.accepted += 1;
            }
        }
        "stdout" => {
            for i in 0..arg {
                println!("flood line {i} {}", "x".repeat(100));
                tally.accepted += 1;
            }
        }
        "names" => {
            let long = "n".repeat(arg as usize);
            tally.record(host::spawn(&long, "attacker", &[]));
            tally.record(host::tell_path(&format!("/user/{long}"), "K", &[]));
            tally.record(messaging::subscribe(&long));
            tally.record(messaging::join(&long));
        }
        "bomb" => {
            for child in ["a", "b"] {
                let init = format!("bomb {}", report_to());
                if !tally.record(host::spawn(child, "attacker", init.as_bytes())) {
                    if !is_top() {
                        report(&report_to(), "bomb-refused", 1);
                    }
                    break;
                }
            }
        }
        "flood" => {
            let body = vec![7u8; 60 << 10];
            for _ in 0..arg {
                tally.record(host::tell(&me, "Flood", &body));
            }
        }
        "reply-next" => {
            tally.record(inbox::reply_next(Report::KIND, &[]));
        }
        "big" => {
            let body = vec![7u8; (1 << 20) + 1];
            tally.record(host::tell_path("/user/victim", "Counter", &body));
        }
        "stop" => {
            host::stop(&Address {
                path: "/user/victim".into(),
                incarnation: arg,
            });
            tally.accepted += 1;
        }
        "after-stop" => {
            host::stop(&me);
            tally.record(timers::schedule(&me, "Tick", &[], 3_600_000, None));
            tally.record(messaging::subscribe("after-stop"));
            tally.record(host::spawn("late", "counter", &[]));
            tally.record(messaging::ask(&me, "Q", &[], 60_000));
        }
        "trap-stopping" => tally.accepted += 1,
        "watches" => {
            for incarnation in 1..=arg {
                let target = Address {
                    path: "/user/victim".into(),
                    incarnation,
                };
                if !tally.record(supervision::watch(&target)) {
                    break;
                }
            }
        }
        "aliases" => {
            for i in 0..arg {
                if !tally.record(naming::alias(&format!("a{i}"))) {
                    break;
                }
            }
        }
        "init" => {
            let init = vec![0u8; (1 << 20) + 1];
            tally.record(host::spawn("big-init", "counter", &init));
        }
        "long-log" => {
            let line = "y".repeat(1 << 20);
            for _ in 0..arg {
                host::log(LogLevel::Error, &line);
                tally.accepted += 1;
            }
        }
        "recurse" => tally.accepted = depth(arg),
        "reminders" => {
            tally.record(persistence::recover());
            for _ in 0..arg {
                if !tally.record(persistence::remind("Tick", &[], 3_600_000, None)) {
                    break;
                }
            }
        }
        "urgent" => {
            let body =
                mote_guest::encode(&mote_example_protocol::Counter::Add(0)).unwrap_or_default();
            for _ in 0..arg {
                tally.record(priority::tell_path_urgent("/user/victim", "Counter", &body));
            }
        }
        other => {
            tally.refused += 1;
            tally.why = Some(format!("unknown attack {other}"));
        }
    }
    tally
}

/// Recurses `n` deep with a small frame: native stack, no shadow stack.
#[inline(never)]
fn depth(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        1 + depth(core::hint::black_box(n - 1))
    }
}

impl Actor for Attacker {
    type Msg = Report;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        let name: String = init_arg(&words, 0, "attack")?;
        let to: String = init_arg(&words, 1, "report-path")?;
        REPORT_TO.with(|r| *r.borrow_mut() = to.clone());
        let tally = if name == "steal" {
            let victim: String = init_arg(&words, 2, "persistence-id")?;
            let mut tally = Tally::default();
            if tally.record(persistence::set_persistence_id(&victim)) {
                tally.record(persistence::recover());
                if let Ok(events) = persistence::replay(0, 1000) {
                    report(&to, "events", events.len() as u64);
                }
                tally.record(persistence::delete_state());
            }
            tally
        } else {
            attack(&name, init_opt(&words, 2, "count")?.unwrap_or(0))
        };
        if name != "bomb" || is_top() {
            report_tally(&to, tally);
        }
        Ok(Attacker {
            trap_in_stopping: name == "trap-stopping",
        })
    }

    fn receive(&mut self, _ctx: &mut Context, msg: Report) -> Result<()> {
        if msg.label == "reply-next" {
            let mut tally = Tally::default();
            tally.record(inbox::reply_next("mote.terminated", &[]));
            tally.record(inbox::reply_next(Report::KIND, &vec![7u8; (1 << 20) + 1]));
            tally.record(inbox::reply_next(&"k".repeat(300), &[]));
            let answer = Report {
                from: host::self_address().path,
                label: "answer".to_string(),
                value: 42,
            };
            let body = mote_guest::encode(&answer).unwrap_or_default();
            tally.record(inbox::reply_next(Report::KIND, &body));
            report_tally(&report_to(), tally);
        }
        Ok(())
    }

    fn stopping(&mut self, _ctx: &mut Context, _reason: mote_guest::StopReason) {
        if self.trap_in_stopping {
            core::arch::wasm32::unreachable();
        }
    }
}

mote_guest::export_actor!(Attacker);
