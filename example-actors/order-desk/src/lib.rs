//! Order desk: the Rust ends of a polyglot pipeline, speaking JSON with Python and JS actors.
//!
//! Init: `source <next-path> <n>` sends `n` orders (kind `order`, JSON) to `next-path` when it
//! starts; `sink <report-to>` receives enriched orders and reports each to `report-to`: `order` =
//! id, `total` = the customer's running total, `gold` = 1 for tier "gold" (else 0), and `via-js`
//! = 1 if the JS stage marked it.

use mote_example_protocol::{init_arg, init_words, report};
use mote_guest::{Actor, Context, Error, Result};
use serde::{Deserialize, Serialize};

/// An order as it travels the pipeline; later stages add fields.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Order {
    /// Its number.
    pub id: u64,
    /// Who ordered.
    pub customer: String,
    /// How much.
    pub amount: u64,
    /// The customer's running total (added by the Python stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// "gold" or "standard" (added by the JS stage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The stage that transformed it last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}
mote_guest::json_message!(Order = "order");

/// What this desk does.
enum Desk {
    Source,
    Sink { report_to: String },
}

impl Actor for Desk {
    type Msg = Order;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let words = init_words(init);
        match words.first().copied() {
            Some("source") => {
                let next: String = init_arg(&words, 1, "next-path")?;
                let n: u64 = init_arg(&words, 2, "n")?;
                let customers = ["ann", "bob"];
                for id in 1..=n {
                    let order = Order {
                        id,
                        customer: customers[(id % 2) as usize].to_owned(),
                        amount: id * 3,
                        total: None,
                        tier: None,
                        via: None,
                    };
                    ctx.tell_path(&next, &order)?;
                }
                Ok(Desk::Source)
            }
            Some("sink") => Ok(Desk::Sink {
                report_to: init_arg(&words, 1, "report-to")?,
            }),
            _ => Err(Error::msg(
                "init: `source <next-path> <n>` or `sink <report-to>`",
            )),
        }
    }

    fn receive(&mut self, ctx: &mut Context, order: Order) -> Result<()> {
        if let Desk::Sink { report_to } = self {
            let to = Some(report_to.as_str());
            report(ctx, to, "total", order.total.unwrap_or(0))?;
            report(
                ctx,
                to,
                "gold",
                u64::from(order.tier.as_deref() == Some("gold")),
            )?;
            report(
                ctx,
                to,
                "via-js",
                u64::from(order.via.as_deref() == Some("js")),
            )?;
            report(ctx, to, "order", order.id)?;
        }
        Ok(())
    }
}

mote_guest::export_actor!(Desk);
