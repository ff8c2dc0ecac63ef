//! Figures as CouchDB names and describes them, and their JSON (`_stats`).

use replicator::scheduler::JobCounts;
use serde_json::{Map, Value, json};

use super::*;

/// Figures the stats read from the rest of the server when asked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gauges {
    pub(crate) open_databases: usize,
    pub(crate) jobs: JobCounts,
}

/// A metric's `type` in CouchDB's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Figure {
    Count(u64),
    Summary(Summary),
}

/// One figure under its CouchDB name (`["couchdb", "httpd", "requests"]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metric {
    pub(crate) path: Vec<&'static str>,
    pub(crate) kind: Kind,
    pub(crate) desc: &'static str,
    pub(crate) figure: Figure,
}

impl Metric {
    pub(super) fn counter(path: &[&'static str], desc: &'static str, figure: Figure) -> Metric {
        Metric {
            path: path.to_vec(),
            kind: Kind::Counter,
            desc,
            figure,
        }
    }

    pub(super) fn histogram(path: &[&'static str], desc: &'static str, summary: Summary) -> Metric {
        Metric {
            path: path.to_vec(),
            kind: Kind::Histogram,
            desc,
            figure: Figure::Summary(summary),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        let value = match &self.figure {
            Figure::Count(n) => json!(n),
            Figure::Summary(summary) => summary.to_json(),
        };
        json!({"value": value, "type": self.kind.as_str(), "desc": self.desc})
    }
}

/// `_stats`' body: every metric nested by its path.
pub(crate) fn to_json(metrics: &[Metric]) -> Value {
    let mut root = Map::new();
    for metric in metrics {
        insert(&mut root, &metric.path, metric.to_json());
    }
    Value::Object(root)
}

pub(super) fn insert(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    match path {
        [] => {}
        [leaf] => {
            map.insert((*leaf).to_string(), value);
        }
        [group, rest @ ..] => {
            let entry = map
                .entry(*group)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(inner) = entry {
                insert(inner, rest, value);
            }
        }
    }
}

/// The part of `_stats` a sub-path names (`couchdb/request_time`, even
/// `couchdb/request_time/value/n`); `null` when there is none, as CouchDB.
pub(crate) fn extract<'a>(mut value: Value, path: impl IntoIterator<Item = &'a str>) -> Value {
    for key in path {
        value = match value {
            Value::Object(mut map) => map.remove(key).unwrap_or(Value::Null),
            _ => return Value::Null,
        };
    }
    value
}
