//! The host imports of the `mote:actor` world: everything an actor can ask of the host.

use std::time::Duration;

use crate::address::{ActorPath, Address};
use crate::ask::Answer;
use crate::bindings::{self, LogLevel, WitAddress, WitSendError, WitSpawnError};
use crate::instance::{ActorState, Limits, to_wit_address};
use crate::mailbox::SystemMsg;
use crate::message::Envelope;
use crate::persistence::{self, Effect};
use crate::supervisor::{Directive, Scope, Strategy};
use crate::timers::TimerTarget;
use crate::{AddressError, SpawnError, SpawnOptions};

impl bindings::mote::actor::types::Host for ActorState {}

impl bindings::mote::actor::host::Host for ActorState {
    fn self_address(&mut self) -> WitAddress {
        to_wit_address(self.me.clone())
    }

    fn parent(&mut self) -> Option<WitAddress> {
        self.parent.clone().map(to_wit_address)
    }

    fn tell(&mut self, to: WitAddress, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
        let envelope = self.envelope(kind, body)?;
        self.send(&to.path, Some(to.incarnation), envelope);
        Ok(())
    }

    fn tell_path(&mut self, to: String, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
        let invalid = |e: AddressError| WitSendError::InvalidPath(e.to_string());
        let envelope = self.envelope(kind, body)?;
        if to.starts_with('/') {
            ActorPath::check(&to).map_err(invalid)?;
            self.send(&to, None, envelope);
        } else {
            let path = self.me.path.select(&to).map_err(invalid)?;
            self.send(path.as_str(), None, envelope);
        }
        Ok(())
    }

    fn spawn(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
    ) -> Result<WitAddress, WitSpawnError> {
        let limits = self.shared.limits_for(&SpawnOptions::default());
        self.spawn_child(name, module, init, limits)
    }

    fn stop(&mut self, target: WitAddress) {
        if target.path == self.me.path.as_str() && target.incarnation == self.me.incarnation {
            self.stop_requested = true;
            return;
        }
        let descendant = ActorPath::parse(&target.path)
            .map(|p| p.is_descendant_of(&self.me.path))
            .unwrap_or(false);
        if !descendant {
            tracing::warn!(target = %target.path, "stop ignored: an actor may stop only itself and its descendants");
            return;
        }
        if let Some(actor) = self.shared.registry.get(&target.path)
            && actor.address.incarnation == target.incarnation
            && let Some(stop) = self.hold(Effect::Stop(actor))
        {
            persistence::run(&self.shared, stop);
        }
    }

    fn log(&mut self, level: LogLevel, message: String) {
        match level {
            LogLevel::Trace => tracing::trace!(target: "mote::guest", "{message}"),
            LogLevel::Debug => tracing::debug!(target: "mote::guest", "{message}"),
            LogLevel::Info => tracing::info!(target: "mote::guest", "{message}"),
            LogLevel::Warn => tracing::warn!(target: "mote::guest", "{message}"),
            LogLevel::Error => tracing::error!(target: "mote::guest", "{message}"),
        }
    }
}

impl bindings::mote::actor::supervision::Host for ActorState {
    fn set_strategy(&mut self, strategy: bindings::WitStrategy) {
        self.supervisor.strategy = Strategy {
            scope: match strategy.scope {
                bindings::WitScope::OneForOne => Scope::OneForOne,
                bindings::WitScope::AllForOne => Scope::AllForOne,
            },
            directive: from_wit_directive(strategy.directive),
            max_restarts: strategy.max_restarts,
            within: Duration::from_millis(strategy.within_ms),
            backoff_min: Duration::from_millis(strategy.backoff_min_ms),
            backoff_max: Duration::from_millis(
                strategy.backoff_max_ms.max(strategy.backoff_min_ms),
            ),
        };
    }

    fn spawn_with(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
        options: bindings::WitSpawnOptions,
    ) -> Result<WitAddress, WitSpawnError> {
        let options = SpawnOptions {
            mailbox_capacity: options.mailbox_capacity.map(|n| n as usize),
            memory_limit: options
                .memory_limit
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            cpu_deadline: options.cpu_deadline_ms.map(Duration::from_millis),
        };
        let limits = self.shared.limits_for(&options);
        self.spawn_child(name, module, init, limits)
    }

    fn watch(&mut self, target: WitAddress) {
        let Ok(path) = ActorPath::parse(&target.path) else {
            tracing::warn!(target = %target.path, "watch ignored: not an actor path");
            return;
        };
        let target = Address {
            path,
            incarnation: target.incarnation,
        };
        if !self.watching.insert(target.clone()) {
            return;
        }
        let me = self.me.clone();
        let registered = self.shared.registry.with(target.path.as_str(), |actor| {
            actor.is_some_and(|a| {
                a.address.incarnation == target.incarnation
                    && a.signal(SystemMsg::Watch(me.clone()))
            })
        });
        if !registered {
            // Already gone: the watcher hears of it at once.
            self.shared.notify_terminated(&me, &target);
        }
    }

    fn unwatch(&mut self, target: WitAddress) {
        let Some(address) = self
            .watching
            .iter()
            .find(|a| a.path.as_str() == target.path && a.incarnation == target.incarnation)
            .cloned()
        else {
            return;
        };
        self.watching.remove(&address);
        let me = self.me.clone();
        self.shared.registry.with(address.path.as_str(), |actor| {
            if let Some(a) = actor.filter(|a| a.address.incarnation == address.incarnation) {
                a.signal(SystemMsg::Unwatch(me));
            }
        });
    }

    fn restart_cause(&mut self) -> Option<String> {
        self.restart_cause.clone()
    }
}

fn from_wit_directive(d: bindings::WitDirective) -> Directive {
    match d {
        bindings::WitDirective::Resume => Directive::Resume,
        bindings::WitDirective::Restart => Directive::Restart,
        bindings::WitDirective::Stop => Directive::Stop,
        bindings::WitDirective::Escalate => Directive::Escalate,
    }
}

impl ActorState {
    /// Sends a copy of `envelope` to each member; returns how many.
    fn send_all(&mut self, members: Vec<Address>, envelope: Envelope) -> u32 {
        let count = members.len() as u32;
        for member in members {
            self.send(
                member.path.as_str(),
                Some(member.incarnation),
                envelope.clone(),
            );
        }
        count
    }

    fn envelope(&self, kind: String, body: Vec<u8>) -> Result<Envelope, WitSendError> {
        let limit = self.shared.config.max_message_bytes;
        if body.len() > limit {
            return Err(WitSendError::TooLarge(body.len() as u64));
        }
        Ok(Envelope::new(Some(self.me.clone()), kind, body))
    }

    fn spawn_child(
        &mut self,
        name: String,
        module: String,
        init: Vec<u8>,
        limits: Limits,
    ) -> Result<WitAddress, WitSpawnError> {
        use WitSpawnError as E;
        if self.stopping {
            return Err(E::Stopping);
        }
        let path = self
            .me
            .path
            .child(&name)
            .map_err(|e| E::InvalidName(e.to_string()))?;
        if self.children.contains_key(&name) {
            return Err(E::NameTaken(path.to_string()));
        }
        let parent = Some(self.me.clone());
        let (child, spec) = self
            .shared
            .prepare(path, &module, init, parent, limits, None)
            .map_err(|e| match e {
                SpawnError::UnknownModule(m) => E::UnknownModule(m),
                SpawnError::NameTaken(p) => E::NameTaken(p),
                SpawnError::Address(a) => E::InvalidName(a.to_string()),
                other => E::Instantiation(other.to_string()),
            })?;
        let address = child.address.clone();
        self.children.insert(name, child);
        if let Some(start) = self.hold(Effect::Start(Box::new(spec))) {
            persistence::run(&self.shared, start);
        }
        Ok(to_wit_address(address))
    }
}

impl bindings::mote::actor::timers::Host for ActorState {
    fn schedule(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
        delay_ms: u64,
        period_ms: Option<u64>,
    ) -> Result<u64, WitSendError> {
        ActorPath::check(&to.path).map_err(|e| WitSendError::InvalidPath(e.to_string()))?;
        let envelope = self.envelope(kind, body)?;
        let target = TimerTarget {
            path: to.path,
            incarnation: Some(to.incarnation),
        };
        let id = self.shared.timers.reserve();
        let timer = Effect::Timer {
            id,
            owner: self.me.clone(),
            target,
            envelope,
            delay: Duration::from_millis(delay_ms),
            period: period_ms.map(Duration::from_millis),
        };
        if let Some(timer) = self.hold(timer) {
            persistence::run(&self.shared, timer);
        }
        Ok(id)
    }

    fn cancel(&mut self, id: u64) -> bool {
        self.shared.timers.cancel(Some(&self.me), id)
    }
}

impl bindings::mote::actor::messaging::Host for ActorState {
    fn subscribe(&mut self, topic: String) {
        self.shared.topics.join(&topic, &self.me);
    }

    fn unsubscribe(&mut self, topic: String) {
        self.shared.topics.leave(&topic, &self.me);
    }

    fn publish(&mut self, topic: String, kind: String, body: Vec<u8>) -> Result<u32, WitSendError> {
        let envelope = self.envelope(kind, body)?;
        if self.durable.is_none() {
            return Ok(self.shared.publish(&topic, envelope));
        }
        let members = self.shared.topics.members(&topic);
        Ok(self.send_all(members, envelope))
    }

    fn join(&mut self, group: String) {
        self.shared.groups.join(&group, &self.me);
    }

    fn leave(&mut self, group: String) {
        self.shared.groups.leave(&group, &self.me);
    }

    fn tell_group(
        &mut self,
        group: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<bool, WitSendError> {
        let envelope = self.envelope(kind, body)?;
        if self.durable.is_none() {
            return Ok(self.shared.tell_group(&group, envelope));
        }
        let Some(member) = self.shared.least_loaded(&group) else {
            return Ok(false);
        };
        self.send(member.path.as_str(), Some(member.incarnation), envelope);
        Ok(true)
    }

    fn broadcast_group(
        &mut self,
        group: String,
        kind: String,
        body: Vec<u8>,
    ) -> Result<u32, WitSendError> {
        let envelope = self.envelope(kind, body)?;
        if self.durable.is_none() {
            return Ok(self.shared.broadcast_group(&group, envelope));
        }
        let members = self.shared.groups.members(&group);
        Ok(self.send_all(members, envelope))
    }

    fn ask(
        &mut self,
        to: WitAddress,
        kind: String,
        body: Vec<u8>,
        timeout_ms: u64,
    ) -> Result<u64, WitSendError> {
        ActorPath::check(&to.path).map_err(|e| WitSendError::InvalidPath(e.to_string()))?;
        let envelope = self.envelope(kind, body)?;
        let answer = Answer::Actor(self.me.clone());
        let timeout = Duration::from_millis(timeout_ms);
        let Some(endpoint) = self.shared.ask_endpoint(timeout, answer) else {
            return Err(WitSendError::InvalidPath("no ask endpoint".to_owned()));
        };
        let id = endpoint.incarnation;
        let request = Envelope::new(Some(endpoint), envelope.kind, envelope.body);
        self.send(&to.path, Some(to.incarnation), request);
        Ok(id)
    }
}
