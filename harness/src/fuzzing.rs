//! Entry points for the fuzz targets (`fuzz/`, feature `fuzzing`): the
//! readers of bytes that a server or a user hands the harness. Not an API:
//! thin wrappers that expose what the targets' invariants look at.

use std::path::PathBuf;

use crate::diff::{self, judge::Rule, load};
use crate::engine::h1::{Feed, ResponseReader};
pub use crate::engine::Check;
pub use crate::stats::Failure;

/// What a chunk of bytes did to the response being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    More,
    /// Complete; the last `leftover` bytes of the chunk follow it.
    Done {
        leftover: usize,
    },
    Fail(Failure),
}

impl From<Feed> for Outcome {
    fn from(f: Feed) -> Outcome {
        match f {
            Feed::More => Outcome::More,
            Feed::Done { leftover } => Outcome::Done { leftover },
            Feed::Fail(f) => Outcome::Fail(f),
        }
    }
}

/// The load engine's HTTP/1 response reader (`engine/proto/h1.rs`), one response at a time.
pub struct Response(ResponseReader);

impl Response {
    pub fn new(head_request: bool) -> Response {
        let mut r = ResponseReader::new();
        r.reset(head_request);
        Response(r)
    }

    pub fn feed(&mut self, data: &[u8], check: &Check) -> Outcome {
        self.0.feed(data, check).into()
    }

    pub fn eof(&mut self, check: &Check) -> Outcome {
        self.0.eof(check).into()
    }

    pub fn status(&self) -> u16 {
        self.0.status
    }

    pub fn close(&self) -> bool {
        self.0.close
    }

    pub fn body_len(&self) -> u64 {
        self.0.body_len
    }

    pub fn verdict(&self) -> Option<Failure> {
        self.0.verdict
    }
}

/// `harness diff`'s reader of a results.json, then the diff of the set with
/// itself in every format: the number of cells, and the regressions found
/// (a set compared with itself has none).
pub fn diff_self(text: &str) -> Result<(usize, usize), String> {
    let set = load::parse(text, PathBuf::from("fuzz.json")).map_err(|e| format!("{e:#}"))?;
    let rule = Rule {
        alpha: 0.05,
        threshold_pct: 2.0,
    };
    let d = diff::diff(&set, &set, rule);
    let _ = diff::render::text(&d);
    let _ = diff::render::markdown(&d);
    let _ = diff::render::json(&d);
    Ok((set.cells.len(), d.regressions))
}

/// `harness report`'s reader of a compare results.json, then its reports
/// rendered (terminal table, report.md, report.html) as `harness report`
/// writes them.
pub fn report(text: &str) -> Result<(), String> {
    use crate::compare::{report, results};
    let r = results::Results::from_json(text).map_err(|e| e.to_string())?;
    if r.header.schema != results::SCHEMA {
        return Err(format!("schema {:?}", r.header.schema));
    }
    let _ = report::table::terminal(&r);
    let _ = report::table::markdown(&r);
    let _ = report::html::render(&r);
    Ok(())
}

/// `harness merge`'s reader of one input (an `.hlog` or a run's JSON): each
/// source's name, requests and intervals.
pub fn merge_input(bytes: &[u8]) -> Result<Vec<(String, u64, usize)>, String> {
    crate::merge::fuzz_read(bytes)
}
