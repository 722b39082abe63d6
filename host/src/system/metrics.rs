//! The host's metrics in the OpenMetrics text format (which Prometheus scrapes), made at each
//! scrape from the counts the layers keep: the kernel's tally and dead letters, every actor's
//! [`ActorStats`](crate::stats::ActorStats), and what each capability registers itself.
//!
//! Invariants:
//! - Nothing is counted for the metrics alone on the message path: a scrape reads counters that
//!   the host keeps anyway, or that cost one uncontended store.
//! - Per-module series are sums over the module's live actors plus those that have stopped, so
//!   a counter never goes down when an actor stops (see `kernel::tally`).
//! - The number of series is bounded whatever the number of actors: per module, plus at most
//!   `top` busiest actors and the actors a scrape names.

use crate::cluster::Cluster;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::{Registry, Unit};

use crate::actor::mailbox::ActorRef;
use crate::caps::Caps;
use crate::deploy::upgrade::Upgrades;
use crate::guestlog::GuestLog;
use crate::kernel::Kernel;
use crate::quota::Quota;
use crate::sandbox::arena::StackStats;
use crate::stats::StatsSnapshot;

/// What a scrape shows beyond the host-wide and per-module series.
#[derive(Clone, Debug, Default)]
pub struct MetricsQuery {
    /// Actors (by path) to show one by one, beside the busiest.
    pub actors: Vec<String>,
    /// How many of the busiest actors (by messages received) to show one by one; `None` takes
    /// the host's [`HostConfig::metrics_top`](crate::HostConfig::metrics_top).
    pub top: Option<usize>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModuleLabel {
    module: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActorLabel {
    actor: String,
    module: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    module: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabel {
    quota: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// One module's figures at a scrape.
#[derive(Default)]
struct ModuleFigures {
    live: i64,
    mailbox: i64,
    stats: StatsSnapshot,
}

/// The same figures, per module or per actor: one family each.
struct Families<L> {
    received: Family<L, Counter>,
    pulled: Family<L, Counter>,
    sent: Family<L, Counter>,
    failures: Family<L, Counter>,
    restarts: Family<L, Counter>,
    committed: Family<L, Counter>,
    mailbox: Family<L, Gauge>,
    memory: Family<L, Gauge>,
    cpu: Family<L, Counter<f64>>,
}

impl<L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static>
    Families<L>
{
    fn new() -> Self {
        Families {
            received: Family::default(),
            pulled: Family::default(),
            sent: Family::default(),
            failures: Family::default(),
            restarts: Family::default(),
            committed: Family::default(),
            mailbox: Family::default(),
            memory: Family::default(),
            cpu: Family::default(),
        }
    }

    fn add(&self, label: &L, stats: &StatsSnapshot, mailbox: i64) {
        self.received.get_or_create(label).inc_by(stats.received);
        self.pulled.get_or_create(label).inc_by(stats.pulled);
        self.sent.get_or_create(label).inc_by(stats.sent);
        self.failures.get_or_create(label).inc_by(stats.failures);
        self.restarts.get_or_create(label).inc_by(stats.restarts);
        self.committed.get_or_create(label).inc_by(stats.committed);
        self.mailbox.get_or_create(label).set(mailbox);
        self.memory
            .get_or_create(label)
            .set(i64::try_from(stats.memory_bytes).unwrap_or(i64::MAX));
        self.cpu
            .get_or_create(label)
            .inc_by(stats.cpu.as_secs_f64());
    }

    fn register(self, registry: &mut Registry, of: &str) {
        let name = |what: &str| format!("{of}_{what}");
        registry.register(
            name("messages_received"),
            format!("Messages handed to the guest, per {of}"),
            self.received,
        );
        registry.register(
            name("messages_pulled"),
            format!("Of those, messages the guest pulled within a call (a burst), per {of}"),
            self.pulled,
        );
        registry.register(
            name("messages_sent"),
            format!("Messages sent (each copy of a group send counts), per {of}"),
            self.sent,
        );
        registry.register(
            name("failures"),
            format!("Failures (trap, error, limit, deadline, commit), per {of}"),
            self.failures,
        );
        registry.register(
            name("restarts"),
            format!("Restarts after a failure, per {of}"),
            self.restarts,
        );
        registry.register(
            name("steps_committed"),
            format!("Steps whose durable writes were committed, per {of}"),
            self.committed,
        );
        registry.register(
            name("mailbox_messages"),
            format!("Messages waiting in the mailbox now, per {of}"),
            self.mailbox,
        );
        registry.register_with_unit(
            name("memory"),
            format!("Linear memory of the live instance(s) now, per {of}"),
            Unit::Bytes,
            self.memory,
        );
        registry.register_with_unit(
            name("cpu"),
            format!(
                "Time guest calls have run (counted for every actor only with metered CPU), per {of}"
            ),
            Unit::Seconds,
            self.cpu,
        );
    }
}

/// What a scrape reads: the parts of a host that keep counts.
pub(crate) struct Sources<'a> {
    pub(crate) kernel: &'a Kernel,
    pub(crate) caps: &'a Caps,
    pub(crate) upgrades: &'a Upgrades,
    pub(crate) guest_log: &'a GuestLog,
    /// The actors' fiber stacks.
    pub(crate) stacks: StackStats,
    /// The cluster, if the host has joined one.
    pub(crate) cluster: Option<&'a Cluster>,
}

/// The host's metrics now, in the OpenMetrics text format.
pub(crate) fn scrape(sources: &Sources<'_>, query: &MetricsQuery) -> String {
    let mut registry = Registry::with_prefix("mote");
    kernel_metrics(sources, &mut registry, query);
    sources.caps.metrics(&mut registry);
    if let Some(cluster) = sources.cluster {
        cluster.metrics(registry.sub_registry_with_prefix("cluster"));
    }
    let mut out = String::new();
    if encode(&mut out, &registry).is_err() {
        tracing::error!("could not encode the metrics");
    }
    out
}

fn kernel_metrics(sources: &Sources<'_>, registry: &mut Registry, query: &MetricsQuery) {
    let kernel = sources.kernel;
    let top = query.top.unwrap_or(kernel.config.metrics_top);
    let mut modules: HashMap<Arc<str>, ModuleFigures> = HashMap::new();
    let mut busiest: BinaryHeap<Reverse<(u64, String)>> = BinaryHeap::new();
    let mut named: Vec<ActorRef> = Vec::new();
    let mut refusals = [0u64; Quota::ALL.len()];
    kernel.tally.with_retired(|retired| {
        kernel.registry.for_each(|actor| {
            let (Some(module), Some(stats)) = (&actor.module, &actor.stats) else {
                return;
            };
            let snapshot = stats.snapshot();
            stats.refusals.add_to(&mut refusals);
            let figures = modules.entry(module.clone()).or_default();
            figures.live += 1;
            figures.mailbox += i64::try_from(actor.depth.messages()).unwrap_or(i64::MAX);
            figures.stats += snapshot;
            // The path is copied only for an actor that enters the busiest so far.
            let enters = match busiest.peek() {
                _ if busiest.len() < top => true,
                Some(Reverse((least, _))) => snapshot.received > *least,
                None => false,
            };
            if enters {
                busiest.push(Reverse((snapshot.received, actor.address.path.to_string())));
                if busiest.len() > top {
                    busiest.pop();
                }
            }
        });
        for (module, stats) in &retired.modules {
            modules.entry(module.clone()).or_default().stats += *stats;
        }
        for (sum, n) in refusals.iter_mut().zip(retired.refusals) {
            *sum += n;
        }
    });
    for Reverse((_, path)) in busiest {
        named.extend(kernel.registry.get(&path));
    }
    for path in &query.actors {
        if let Some(actor) = kernel.registry.get(path)
            && !named.iter().any(|a| a.address == actor.address)
        {
            named.push(actor);
        }
    }

    registry.register(
        "actors_live",
        "Live actors (not probes or ask endpoints)",
        ConstGauge::new(modules.values().map(|m| m.live).sum::<i64>()),
    );
    registry.register(
        "spawns",
        "Actors spawned, restarts not included",
        ConstCounter::new(kernel.tally.spawns()),
    );
    let dead = Family::<ReasonLabel, Counter>::default();
    for (reason, n) in kernel.dead_letters.by_reason() {
        dead.get_or_create(&ReasonLabel {
            reason: reason.name().to_owned(),
        })
        .inc_by(n);
    }
    registry.register("dead_letters", "Dead letters, by reason", dead);
    let refused = Family::<QuotaLabel, Counter>::default();
    for (quota, n) in Quota::ALL.iter().zip(refusals) {
        refused
            .get_or_create(&QuotaLabel {
                quota: quota.name().to_owned(),
            })
            .inc_by(n);
    }
    registry.register(
        "refusals",
        "Requests refused past a quota, by quota",
        refused,
    );
    let failures = Family::<FailureLabel, Counter>::default();
    for (module, kind, n) in kernel.tally.failures() {
        failures
            .get_or_create(&FailureLabel {
                module: module.to_string(),
                kind: kind.name().to_owned(),
            })
            .inc_by(n);
    }
    registry.register("failures", "Actor failures, by module and kind", failures);
    let upgrades = Family::<OutcomeLabel, Counter>::default();
    for (outcome, n) in [
        ("upgraded", &sources.upgrades.done),
        ("failed", &sources.upgrades.failed),
    ] {
        upgrades
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc_by(n.load(Ordering::Relaxed));
    }
    registry.register(
        "upgrades",
        "Actors upgraded to another module version, by outcome",
        upgrades,
    );
    registry.register(
        "guest_log_dropped",
        "Guest log lines dropped because the log writer was behind",
        ConstCounter::new(sources.guest_log.dropped()),
    );
    registry.register(
        "fiber_stacks",
        "Fiber stacks held by actors' stores",
        ConstGauge::new(i64::try_from(sources.stacks.live).unwrap_or(i64::MAX)),
    );
    registry.register(
        "fiber_stack_releases",
        "Idle actors' fiber stacks whose pages were given back to the kernel",
        ConstCounter::new(sources.stacks.releases),
    );

    let per_module = Families::<ModuleLabel>::new();
    let actors = Family::<ModuleLabel, Gauge>::default();
    for (module, figures) in &modules {
        let label = ModuleLabel {
            module: module.to_string(),
        };
        per_module.add(&label, &figures.stats, figures.mailbox);
        actors.get_or_create(&label).set(figures.live);
    }
    registry.register("module_actors", "Live actors, per module", actors);
    per_module.register(registry, "module");

    let per_actor = Families::<ActorLabel>::new();
    for actor in &named {
        let (Some(module), Some(stats)) = (&actor.module, &actor.stats) else {
            continue;
        };
        let label = ActorLabel {
            actor: actor.address.path.to_string(),
            module: module.to_string(),
        };
        let depth = i64::try_from(actor.depth.messages()).unwrap_or(i64::MAX);
        per_actor.add(&label, &stats.snapshot(), depth);
    }
    per_actor.register(registry, "actor");
}
