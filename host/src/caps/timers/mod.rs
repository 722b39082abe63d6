//! `mote:actor/timers`: messages delivered later, once or periodically.
//!
//! Invariants:
//! - A timer dies with the actor that scheduled it: stopping or restarting an actor cancels its
//!   timers under the lock that fires them (see [`wheel`]), so none fires after the stop.
//! - A persistent actor's timer is armed only once the step that scheduled it has committed;
//!   its id is valid (cancellable) from the start.

pub(crate) mod wheel;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use wasmtime::component::Linker;

use self::wheel::{Fired, Wheel};
use super::capability::{ActorState, Call, Capability, Env, HasCall, Origin, Provides};
use crate::actor::core::ActorCore;
use crate::actor::step::{Commit, Deferred, Step};
use crate::address::{ActorPath, Address};
use crate::error::HostError;
use crate::kernel::Kernel;
use crate::message::{Envelope, Receipt};
use crate::quota::Quota;
use crate::sandbox::bindings::mote::actor::timers;
use crate::sandbox::bindings::{WitAddress, WitSendError};

/// One scheduled message.
struct Timer {
    to: String,
    /// The incarnation addressed, if one is.
    incarnation: Option<u64>,
    envelope: Envelope,
}

/// A timer as an image keeps it: `to` is `None` for a timer to the actor itself.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptTimer {
    id: u64,
    left_ms: u64,
    period_ms: Option<u64>,
    to: Option<(String, Option<u64>)>,
    kind: String,
    body: Vec<u8>,
}

/// The capability behind the `timers` interface: one wheel for the whole host.
#[derive(Default)]
pub(crate) struct Timers {
    wheel: Arc<Wheel<Address, Timer>>,
    next_id: AtomicU64,
}

impl Timers {
    fn reserve(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Schedules `envelope` for `to` after `delay` (then every `period`); returns its id.
    pub(crate) fn schedule(
        &self,
        owner: Option<Address>,
        to: &str,
        incarnation: Option<u64>,
        envelope: Envelope,
        delay: Duration,
        period: Option<Duration>,
    ) -> u64 {
        let id = self.reserve();
        let timer = Timer {
            to: to.to_owned(),
            incarnation,
            envelope,
        };
        self.wheel.insert(id, owner, timer, delay, period);
        id
    }

    /// Cancels a timer, only if `owner` scheduled it; false if it is gone.
    pub(crate) fn cancel(&self, owner: Option<&Address>, id: u64) -> bool {
        self.wheel.cancel(id, owner)
    }

    /// How many timers are pending.
    pub(crate) fn pending(&self) -> usize {
        self.wheel.pending()
    }
}

impl Capability for Timers {
    /// Timers the current step scheduled and will arm when it is released.
    type State = usize;
    const IMPORTS: &'static [&'static str] = &["mote:actor/timers@"];

    fn new(_env: &Env<'_>) -> Result<Self, HostError> {
        // Ids start from the clock, so that those of timers restored from an image taken in
        // an earlier host run (or on another node) are not handed out again.
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
            << 8;
        Ok(Timers {
            next_id: AtomicU64::new(start),
            ..Timers::default()
        })
    }

    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()> {
        timers::add_to_linker::<_, HasCall<Self>>(linker, |s| s.call())
    }

    fn state(&self, _actor: &ActorCore, _origin: Origin<'_, usize>) -> usize {
        0
    }

    fn metrics(&self, registry: &mut Registry) {
        registry.register(
            "timers_pending",
            "Timers armed and not yet fired or cancelled (reminders not included)",
            ConstGauge::new(i64::try_from(self.pending()).unwrap_or(i64::MAX)),
        );
    }

    fn started(&self, kernel: &Arc<Kernel>) {
        let driver = self
            .wheel
            .clone()
            .drive(Arc::downgrade(kernel), |kernel, _, _, timer| {
                kernel.tell_address(&timer.to, timer.incarnation, timer.envelope.clone());
                Fired::Delivered
            });
        kernel.runtime.spawn(driver);
    }

    fn closed(&self) {
        self.wheel.wake();
    }

    fn capture(&self, actor: &ActorCore, _state: &usize) -> Result<Vec<u8>, String> {
        let me = &actor.me;
        let kept: Vec<KeptTimer> = self
            .wheel
            .entries_of(me, |timer| {
                // A timer to the actor itself follows it wherever it is restored.
                let to_self = timer.to == me.path.as_str()
                    && timer.incarnation.is_none_or(|i| i == me.incarnation);
                (
                    (!to_self).then(|| (timer.to.clone(), timer.incarnation)),
                    timer.envelope.kind.clone(),
                    timer.envelope.body.clone(),
                )
            })
            .into_iter()
            .map(|(id, left, period, (to, kind, body))| KeptTimer {
                id,
                left_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
                period_ms: period.map(|p| u64::try_from(p.as_millis()).unwrap_or(u64::MAX)),
                to,
                kind,
                body,
            })
            .collect();
        if kept.is_empty() {
            return Ok(Vec::new());
        }
        Ok(crate::storage::database::encode(&kept))
    }

    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<usize, String> {
        if image.is_empty() {
            return Ok(0);
        }
        let kept: Vec<KeptTimer> = postcard::from_bytes(image).map_err(|e| e.to_string())?;
        let quotas = actor.quotas();
        if kept.len() > quotas.timers {
            return Err("more timers than the actor's quota allows".into());
        }
        let mut timers = Vec::with_capacity(kept.len());
        for timer in kept {
            let period = timer.period_ms.map(Duration::from_millis);
            quotas
                .check_period(period)
                .map_err(|q| format!("a timer's period is refused: {q:?}"))?;
            if self.wheel.contains(timer.id) {
                return Err(format!("timer id {} is taken on this host", timer.id));
            }
            let (to, incarnation) = match timer.to {
                Some((to, incarnation)) => {
                    ActorPath::check(&to).map_err(|e| e.to_string())?;
                    (to, incarnation)
                }
                None => (actor.me.path.to_string(), Some(actor.me.incarnation)),
            };
            let envelope = actor
                .envelope(timer.kind, timer.body)
                .map_err(|e| format!("a timer's message is refused: {e:?}"))?;
            timers.push((
                timer.id,
                Timer {
                    to,
                    incarnation,
                    envelope,
                },
                timer.left_ms,
                period,
            ));
        }
        for (id, timer, left_ms, period) in timers {
            self.next_id.fetch_max(id, Ordering::Relaxed);
            let delay = Duration::from_millis(left_ms);
            self.wheel
                .insert(id, Some(actor.me.clone()), timer, delay, period);
        }
        Ok(0)
    }

    fn restarting(&self, actor: &Address, _state: &mut usize) {
        // The new instance schedules its own timers in `start`.
        self.wheel.cancel_owner(actor);
    }

    fn stopped(&self, _kernel: &Arc<Kernel>, actor: &Address, _state: Option<&mut usize>) {
        self.wheel.cancel_owner(actor);
    }

    fn seal(
        &self,
        state: &mut usize,
        _step: &mut Step,
        _consumed: &mut Vec<Receipt>,
    ) -> Option<Commit> {
        // The step's timers are armed (or dropped) with it from here on.
        *state = 0;
        None
    }

    fn abandon(&self, state: &mut usize) {
        *state = 0;
    }
}

/// A timer to arm when its step is released.
struct Arm {
    wheel: Arc<Wheel<Address, Timer>>,
    id: u64,
    owner: Address,
    timer: Timer,
    delay: Duration,
    period: Option<Duration>,
}

impl Deferred for Arm {
    fn release(self, _kernel: &Arc<Kernel>) {
        self.wheel.insert(
            self.id,
            Some(self.owner),
            self.timer,
            self.delay,
            self.period,
        );
    }
}

impl timers::Host for Call<'_, Timers> {
    fn schedule(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
        delay_ms: u64,
        period_ms: Option<u64>,
    ) -> Result<u64, WitSendError> {
        self.actor.check_path(&to.path)?;
        ActorPath::check(&to.path)?;
        let envelope = self.actor.envelope(kind, body)?;
        let period = period_ms.map(Duration::from_millis);
        let quotas = *self.actor.quotas();
        quotas
            .check_period(period)
            .map_err(|q| self.actor.refuse(q))?;
        // Armed timers, and those this step will arm when it is released.
        let pending = self.cap.wheel.owned(&self.actor.me) + *self.state;
        if pending >= quotas.timers {
            return Err(self.actor.refuse(Quota::Timers).into());
        }
        let id = self.cap.reserve();
        let arm = Arm {
            wheel: self.cap.wheel.clone(),
            id,
            owner: self.actor.me.clone(),
            timer: Timer {
                to: to.path,
                incarnation: Some(to.incarnation),
                envelope,
            },
            delay: Duration::from_millis(delay_ms),
            period,
        };
        if self.actor.step.holds() {
            *self.state += 1;
        }
        self.actor.step.defer(&self.actor.kernel, arm);
        Ok(id)
    }

    fn cancel(&mut self, id: u64) -> bool {
        self.cap.wheel.cancel(id, Some(&self.actor.me))
    }
}
