//! The functions the host calls on an actor: found and type-checked once per module, when it is
//! deployed, then looked up by index in each of its instances with no type check of their own.
//!
//! `get_typed_func` type-checks a function every time it is asked for it, and every spawn
//! asked for the actor interface's three and `packed-receive`: about 5,500 instructions of the
//! 95,000 a spawn, its message and its stop took (callgrind), for a check whose answer cannot
//! change between two instances of one component.
//!
//! Invariants (tested below):
//! - Every index in [`ExportIndices`] names a function of the component its `InstancePre`
//!   instantiates, checked against the signature the host calls it with (the type aliases
//!   here), so [`Exports`] loaded from an instance of that `InstancePre` may be called with
//!   `TypedFunc::new_unchecked` at those signatures.
//! - A module with a required function missing, or any function it exports for the host (the
//!   actor interface, `supervise`, the upgrade hooks, `packed-receive`) of another type, is
//!   refused at deploy, naming that function.

use wasmtime::AsContextMut;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, Func, Instance, InstancePre, Lift, Lower, TypedFunc,
};

use super::checks::{ACTOR_EXPORT, PACKED_RECEIVE_EXPORT, SUPERVISOR_EXPORT, UPGRADE_EXPORT};
use crate::error::ModuleError;
use crate::sandbox::bindings::{
    WitAddress, WitDirective, WitFailureKind, WitMessage, WitStopReason,
};

/// `actor.start`.
pub(crate) type StartFunc<'a> = TypedFunc<(&'a [u8],), (Result<(), String>,)>;
/// `actor.receive`.
pub(crate) type ReceiveFunc<'a> = TypedFunc<(&'a WitMessage,), (Result<(), String>,)>;
/// `actor.stopping`.
pub(crate) type StoppingFunc<'a> = TypedFunc<(&'a WitStopReason,), ()>;
/// `supervisor.supervise`.
pub(crate) type SuperviseFunc =
    TypedFunc<(WitAddress, WitFailureKind, String), (Option<WitDirective>,)>;
/// `upgrade.save-state`.
pub(crate) type SaveStateFunc = TypedFunc<(), (Option<Vec<u8>>,)>;
/// `upgrade.migrate`.
pub(crate) type MigrateFunc = TypedFunc<(String, Vec<u8>), (Result<(), String>,)>;
/// `packed-receive.receive`.
pub(crate) type PackedReceiveFunc<'a> = TypedFunc<(&'a [u8],), (Result<(), String>,)>;

/// Where a module's functions for the host are, each checked against its signature.
#[derive(Clone, Debug)]
pub(crate) struct ExportIndices {
    start: ComponentExportIndex,
    receive: ComponentExportIndex,
    stopping: ComponentExportIndex,
    supervise: Option<ComponentExportIndex>,
    upgrade: Option<(ComponentExportIndex, ComponentExportIndex)>,
    packed_receive: Option<ComponentExportIndex>,
}

impl ExportIndices {
    /// Finds and type-checks the functions the host calls in `pre`'s component, that of the
    /// module `module`.
    pub(crate) fn new<T>(module: &str, pre: &InstancePre<T>) -> Result<Self, ModuleError> {
        let finder = Finder { module, pre };
        let required = |found: Option<ComponentExportIndex>, name: &str| {
            found.ok_or_else(|| finder.mismatch(ACTOR_EXPORT, name, "missing", None))
        };
        let start = finder.check::<StartFunc>(ACTOR_EXPORT, "start")?;
        let receive = finder.check::<ReceiveFunc>(ACTOR_EXPORT, "receive")?;
        let stopping = finder.check::<StoppingFunc>(ACTOR_EXPORT, "stopping")?;
        let supervise = finder.check::<SuperviseFunc>(SUPERVISOR_EXPORT, "supervise")?;
        // Both hooks or neither: one alone does not make a module upgradable.
        let upgrade = match (
            finder.check::<SaveStateFunc>(UPGRADE_EXPORT, "save-state")?,
            finder.check::<MigrateFunc>(UPGRADE_EXPORT, "migrate")?,
        ) {
            (Some(save), Some(migrate)) => Some((save, migrate)),
            _ => None,
        };
        let packed_receive = finder.check::<PackedReceiveFunc>(PACKED_RECEIVE_EXPORT, "receive")?;
        Ok(ExportIndices {
            start: required(start, "start")?,
            receive: required(receive, "receive")?,
            stopping: required(stopping, "stopping")?,
            supervise,
            upgrade,
            packed_receive,
        })
    }

    /// Whether the component exports both upgrade hooks.
    pub(crate) fn upgradable(&self) -> bool {
        self.upgrade.is_some()
    }

    /// Whether the component exports `packed-receive`.
    pub(crate) fn packed_receive(&self) -> bool {
        self.packed_receive.is_some()
    }

    /// The functions of `instance`, an instance of the `InstancePre` these indices were found
    /// in; `None` if one of them is not there (never, for such an instance).
    pub(crate) fn load(
        &self,
        mut store: impl AsContextMut,
        instance: &Instance,
    ) -> Option<Exports> {
        let mut get = |index: &ComponentExportIndex| instance.get_func(&mut store, index);
        let start = get(&self.start)?;
        let receive = get(&self.receive)?;
        let stopping = get(&self.stopping)?;
        let supervise = match &self.supervise {
            Some(index) => Some(get(index)?),
            None => None,
        };
        let upgrade = match &self.upgrade {
            Some((save, migrate)) => Some((get(save)?, get(migrate)?)),
            None => None,
        };
        let packed = match &self.packed_receive {
            Some(index) => Some(get(index)?),
            None => None,
        };
        Some(Exports {
            start,
            receive,
            stopping,
            supervise,
            upgrade,
            packed,
        })
    }
}

/// The functions of one instance the host calls, each of the type its signature here says
/// (see [`ExportIndices::load`]).
#[derive(Clone, Copy)]
pub(crate) struct Exports {
    start: Func,
    receive: Func,
    stopping: Func,
    supervise: Option<Func>,
    upgrade: Option<(Func, Func)>,
    packed: Option<Func>,
}

impl Exports {
    /// `actor.start`.
    pub(crate) fn start<'a>(&self) -> StartFunc<'a> {
        // SAFETY: checked as this signature at deploy (`ExportIndices::new`).
        unsafe { StartFunc::new_unchecked(self.start) }
    }

    /// `actor.receive`.
    pub(crate) fn receive<'a>(&self) -> ReceiveFunc<'a> {
        // SAFETY: as for `start`.
        unsafe { ReceiveFunc::new_unchecked(self.receive) }
    }

    /// `actor.stopping`.
    pub(crate) fn stopping<'a>(&self) -> StoppingFunc<'a> {
        // SAFETY: as for `start`.
        unsafe { StoppingFunc::new_unchecked(self.stopping) }
    }

    /// `supervisor.supervise`, if exported.
    pub(crate) fn supervise(&self) -> Option<SuperviseFunc> {
        // SAFETY: as for `start`.
        self.supervise
            .map(|func| unsafe { SuperviseFunc::new_unchecked(func) })
    }

    /// The upgrade hooks, `save-state` and `migrate`, if both are exported.
    pub(crate) fn upgrade(&self) -> Option<(SaveStateFunc, MigrateFunc)> {
        // SAFETY: as for `start`.
        self.upgrade.map(|(save, migrate)| unsafe {
            (
                SaveStateFunc::new_unchecked(save),
                MigrateFunc::new_unchecked(migrate),
            )
        })
    }

    /// `packed-receive.receive`, if exported.
    pub(crate) fn packed<'a>(&self) -> Option<PackedReceiveFunc<'a>> {
        // SAFETY: as for `start`.
        self.packed
            .map(|func| unsafe { PackedReceiveFunc::new_unchecked(func) })
    }
}

/// The parameters and results of a typed function, which a signature here names.
trait Signature {
    type Params: ComponentNamedList + Lower;
    type Results: ComponentNamedList + Lift;
}

impl<P, R> Signature for TypedFunc<P, R>
where
    P: ComponentNamedList + Lower,
    R: ComponentNamedList + Lift,
{
    type Params = P;
    type Results = R;
}

/// Looks up the functions of one module's component.
struct Finder<'a, T: 'static> {
    module: &'a str,
    pre: &'a InstancePre<T>,
}

impl<T> Finder<'_, T> {
    /// The index of `interface#name` if the component exports it, checked to be a function of
    /// signature `F`.
    fn check<F: Signature>(
        &self,
        interface: &str,
        name: &str,
    ) -> Result<Option<ComponentExportIndex>, ModuleError> {
        let component = self.pre.component();
        let Some((item, index)) = component
            .get_export(None, interface)
            .and_then(|(_, instance)| component.get_export(Some(&instance), name))
        else {
            return Ok(None);
        };
        match item {
            ComponentItem::ComponentFunc(func) => func
                .typecheck::<F::Params, F::Results>(&self.pre.instance_type())
                .map(|()| Some(index))
                .map_err(|e| {
                    let why = "not of the type the host calls it with";
                    self.mismatch(interface, name, why, Some(e))
                }),
            _ => Err(self.mismatch(interface, name, "not a function", None)),
        }
    }

    /// The module's refusal: `interface#name` is not what the host calls (`reason`), and
    /// wasmtime's type check, where that is what failed, as the source.
    fn mismatch(
        &self,
        interface: &str,
        name: &str,
        reason: &str,
        source: Option<wasmtime::Error>,
    ) -> ModuleError {
        ModuleError::WrongWorld {
            name: self.module.to_owned(),
            reason: format!("export `{interface}#{name}`: {reason}"),
            source: source.map(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::component::{Component, Linker};
    use wasmtime::{Engine, Store};

    /// A component that exports the actor interface's functions named in `actor` (each does
    /// nothing and succeeds), plus `extra`: component items that may use the core functions
    /// `nothing` (returns 0) and `realloc`.
    fn component(engine: &Engine, actor: &[&str], extra: &str) -> Component {
        let funcs: String = actor
            .iter()
            .map(|f| format!("(export \"{f}\" (func ${f}))"))
            .collect();
        let wat = format!(
            r#"(component
                (core module $m
                    (memory (export "mem") 1)
                    (func (export "realloc") (param i32 i32 i32 i32) (result i32) i32.const 8)
                    (func (export "nothing") (result i32) i32.const 0)
                    (func (export "start") (param i32 i32) (result i32) i32.const 0)
                    (func (export "receive") (param i32 i32 i32 i64 i32 i32 i32 i32) (result i32)
                        i32.const 0)
                    (func (export "stopping") (param i32 i32 i32)))
                (core instance $i (instantiate $m))
                (type $address' (record (field "path" string) (field "incarnation" u64)))
                (export $address "address" (type $address'))
                (type $message' (record (field "sender" (option $address)) (field "kind" string)
                    (field "body" (list u8))))
                (export $message "message" (type $message'))
                (type $stop' (variant (case "normal") (case "failure" string)
                    (case "parent-failure" string) (case "shutdown")))
                (export $stop "stop-reason" (type $stop'))
                (func $start (param "init" (list u8)) (result (result (error string)))
                    (canon lift (core func $i "start") (memory (core memory $i "mem"))
                        (realloc (core func $i "realloc"))))
                (func $receive (param "msg" $message) (result (result (error string)))
                    (canon lift (core func $i "receive") (memory (core memory $i "mem"))
                        (realloc (core func $i "realloc"))))
                (func $stopping (param "reason" $stop)
                    (canon lift (core func $i "stopping") (memory (core memory $i "mem"))
                        (realloc (core func $i "realloc"))))
                (instance $actor
                    (export "message" (type $message))
                    (export "stop-reason" (type $stop))
                    {funcs})
                (export "{ACTOR_EXPORT}" (instance $actor))
                {extra})"#
        );
        Component::new(engine, wat).expect("the test component is valid")
    }

    const ACTOR: &[&str] = &["start", "receive", "stopping"];

    fn pre(engine: &Engine, component: &Component) -> InstancePre<()> {
        Linker::new(engine).instantiate_pre(component).unwrap()
    }

    #[test]
    fn functions_checked_at_deploy_are_called_unchecked_in_every_instance() {
        let engine = Engine::default();
        let pre = pre(&engine, &component(&engine, ACTOR, ""));
        let indices = ExportIndices::new("m", &pre).unwrap();
        assert!(!indices.packed_receive() && !indices.upgradable());
        for _ in 0..2 {
            let mut store = Store::new(&engine, ());
            let instance = pre.instantiate(&mut store).unwrap();
            let exports = indices.load(&mut store, &instance).unwrap();
            assert!(exports.supervise().is_none() && exports.upgrade().is_none());
            let (started,) = exports.start().call(&mut store, (b"init",)).unwrap();
            assert_eq!(started, Ok(()));
        }
    }

    #[test]
    fn a_module_without_an_actor_function_is_refused_naming_it() {
        let engine = Engine::default();
        let pre = pre(&engine, &component(&engine, &["start", "receive"], ""));
        let err = ExportIndices::new("m", &pre).unwrap_err();
        let ModuleError::WrongWorld { reason, source, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(reason, format!("export `{ACTOR_EXPORT}#stopping`: missing"));
        assert!(source.is_none());
    }

    #[test]
    fn a_function_for_the_host_of_another_type_is_refused_naming_it() {
        let engine = Engine::default();
        let supervise = format!(
            r#"(func $supervise (result u32) (canon lift (core func $i "nothing")))
               (instance $s (export "supervise" (func $supervise)))
               (export "{SUPERVISOR_EXPORT}" (instance $s))"#
        );
        let pre = pre(&engine, &component(&engine, ACTOR, &supervise));
        let err = ExportIndices::new("m", &pre).unwrap_err();
        let ModuleError::WrongWorld { reason, source, .. } = err else {
            panic!("{err:?}");
        };
        assert_eq!(
            reason,
            format!(
                "export `{SUPERVISOR_EXPORT}#supervise`: not of the type the host calls it with"
            )
        );
        assert!(source.is_some(), "wasmtime's type check is kept");
    }

    #[test]
    fn a_packed_receive_export_must_have_the_signature_the_host_calls() {
        let engine = Engine::default();
        // `start`'s core function has the flat shape of each of these.
        let packed = |func_type: &str| {
            let extra = format!(
                r#"(func $packed {func_type}
                       (canon lift (core func $i "start") (memory (core memory $i "mem"))
                           (realloc (core func $i "realloc"))))
                   (instance $p (export "receive" (func $packed)))
                   (export "{PACKED_RECEIVE_EXPORT}" (instance $p))"#
            );
            ExportIndices::new("m", &pre(&engine, &component(&engine, ACTOR, &extra)))
        };
        let good = packed(r#"(param "msg" (list u8)) (result (result (error string)))"#);
        assert!(good.unwrap().packed_receive());
        let wrong_list = packed(r#"(param "msg" (list u32)) (result (result (error string)))"#);
        let err = wrong_list.unwrap_err();
        assert!(matches!(err, ModuleError::WrongWorld { .. }), "{err:?}");
        assert!(err.to_string().contains("packed-receive"), "{err}");
        let wrong_result = packed(r#"(param "msg" (list u8)) (result string)"#);
        assert!(wrong_result.is_err());
    }

    #[test]
    fn one_upgrade_hook_alone_does_not_make_a_module_upgradable() {
        let engine = Engine::default();
        let save = format!(
            r#"(func $save (result (option (list u8)))
                   (canon lift (core func $i "nothing") (memory (core memory $i "mem"))
                       (realloc (core func $i "realloc"))))
               (instance $u (export "save-state" (func $save)))
               (export "{UPGRADE_EXPORT}" (instance $u))"#
        );
        let pre = pre(&engine, &component(&engine, ACTOR, &save));
        let indices = ExportIndices::new("m", &pre).unwrap();
        assert!(!indices.upgradable());
    }
}
