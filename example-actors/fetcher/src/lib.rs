//! Fetcher: HTTP call-outs (Akka `pipeTo`). `Fetch::Get` starts a call-out and answers at
//! once with `Fetched::Started(id)` (or `Refused`); the actor keeps answering `Fetch::Ping`
//! while the request is in flight, and when the outcome arrives it tells its observer (init:
//! `<observer path>`) `Fetched::Response` or `Fetched::Failed`. `Fetch::Burst` starts call-outs
//! until one is refused (its quota) and answers how many started; `Fetch::Crash` panics (its
//! call-outs die with the instance). Needs the `wasi:http` grant.

use std::time::Duration;

use mote_example_protocol::{Fetch, Fetched, init_opt, init_words};
use mote_guest::{Actor, CalloutError, Context, HttpRequest, HttpResponse, Result};

struct Fetcher {
    /// Where outcomes go.
    observer: Option<String>,
}

fn request(url: &str, timeout_ms: u64) -> HttpRequest {
    let request = HttpRequest::get(url).header("accept", "*/*");
    if timeout_ms == 0 {
        request
    } else {
        request.timeout(Duration::from_millis(timeout_ms))
    }
}

impl Actor for Fetcher {
    type Msg = Fetch;

    fn start(_ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let observer = init_opt(&init_words(init), 0, "observer")?;
        Ok(Fetcher { observer })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Fetch) -> Result<()> {
        match msg {
            Fetch::Get { url, timeout_ms } => match ctx.http_request(&request(&url, timeout_ms)) {
                Ok(id) => ctx.reply(&Fetched::Started(id)),
                Err(e) => ctx.reply(&Fetched::Refused(format!("{e:?}"))),
            },
            Fetch::Burst { url, n } => {
                let (mut started, mut refused, mut why) = (0, 0, String::new());
                for _ in 0..n {
                    match ctx.http_request(&request(&url, 0)) {
                        Ok(_) => started += 1,
                        Err(e) => {
                            refused += 1;
                            why = format!("{e:?}");
                        }
                    }
                }
                ctx.reply(&Fetched::Burst {
                    started,
                    refused,
                    why,
                })
            }
            Fetch::Ping(n) => ctx.reply(&Fetched::Pong(n)),
            Fetch::Crash => panic!("asked to crash"),
        }
    }

    fn http_response(
        &mut self,
        ctx: &mut Context,
        id: u64,
        outcome: core::result::Result<HttpResponse, CalloutError>,
    ) -> Result<()> {
        let news = match outcome {
            Ok(response) => Fetched::Response {
                id,
                status: response.status,
                body: response.body,
            },
            Err(error) => Fetched::Failed {
                id,
                error: format!("{error:?}"),
            },
        };
        match &self.observer {
            Some(to) => ctx.tell_path(to, &news),
            None => Ok(()),
        }
    }
}

mote_guest::export_actor!(Fetcher);
