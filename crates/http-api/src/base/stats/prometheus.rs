//! The figures as Prometheus text (`_prometheus`), under CouchDB's family names.

use std::fmt::Write as _;

use super::*;

/// The Prometheus media type: text exposition format 0.0.4.
pub(crate) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// How one metric shows in Prometheus: CouchDB's family name, type and help,
/// and its label when the family has several series.
pub(super) struct Series {
    family: String,
    kind: &'static str,
    help: &'static str,
    label: Option<(&'static str, &'static str)>,
}

pub(super) fn series(metric: &Metric) -> Series {
    match metric.path.as_slice() {
        ["couchdb", "httpd_request_methods", method] => Series {
            family: "couchdb_httpd_request_methods".into(),
            kind: "counter",
            help: "number of HTTP requests by method",
            label: Some(("method", *method)),
        },
        ["couchdb", "httpd_status_codes", code] => Series {
            family: "couchdb_httpd_status_codes".into(),
            kind: "counter",
            help: "number of HTTP responses by status code",
            label: Some(("code", *code)),
        },
        // Prometheus assumes counters never go down: CouchDB shows this one as a gauge.
        ["couchdb", "open_databases"] => Series {
            family: "couchdb_open_databases".into(),
            kind: "gauge",
            help: metric.desc,
            label: None,
        },
        path => {
            let rest = match path {
                ["couchdb", rest @ ..] => rest,
                rest => rest,
            };
            let base = format!("couchdb_{}", rest.join("_"));
            let (family, kind) = match metric.kind {
                Kind::Counter if base.ends_with("_total") => (base, "counter"),
                Kind::Counter => (format!("{base}_total"), "counter"),
                Kind::Gauge => (base, "gauge"),
                Kind::Histogram => (format!("{base}_seconds"), "summary"),
            };
            Series {
                family,
                kind,
                help: metric.desc,
                label: None,
            }
        }
    }
}

/// Figures only the Prometheus text has (CouchDB's system figures that mean
/// something for Recliner).
#[derive(Debug, Clone, Copy)]
pub(crate) struct System {
    pub(crate) uptime_seconds: u64,
    /// Nodes in the cluster: this one.
    pub(crate) nodes: usize,
}

/// `_prometheus`' body: each family's `# HELP` and `# TYPE` once, then its
/// samples; histograms as summaries in seconds, as CouchDB shows them.
pub(crate) fn to_prometheus(metrics: &[Metric], system: &System) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let mut current = String::new();
    for metric in metrics {
        let series = series(metric);
        if series.family != current {
            header(&mut out, &series.family, series.help, series.kind);
            current.clone_from(&series.family);
        }
        match &metric.figure {
            Figure::Count(n) => sample(&mut out, &series.family, series.label, n),
            Figure::Summary(summary) => {
                for ((.., quantile), value) in PERCENTILES.iter().zip(&summary.percentiles) {
                    let seconds = if summary.n == 0 { 0.0 } else { value / 1000.0 };
                    sample(
                        &mut out,
                        &series.family,
                        Some(("quantile", quantile)),
                        seconds,
                    );
                }
                let sum = summary.n as f64 * summary.mean / 1000.0;
                sample(&mut out, &format!("{}_sum", series.family), None, sum);
                sample(
                    &mut out,
                    &format!("{}_count", series.family),
                    None,
                    summary.n,
                );
            }
        }
    }
    header(
        &mut out,
        "couchdb_uptime_seconds",
        "couchdb uptime",
        "counter",
    );
    sample(
        &mut out,
        "couchdb_uptime_seconds",
        None,
        system.uptime_seconds,
    );
    header(
        &mut out,
        "couchdb_membership",
        "count of nodes in the cluster",
        "gauge",
    );
    for nodes in ["cluster_nodes", "all_nodes"] {
        sample(
            &mut out,
            "couchdb_membership",
            Some(("nodes", nodes)),
            system.nodes,
        );
    }
    out
}

pub(super) fn header(out: &mut String, family: &str, help: &str, kind: &str) {
    // Help text escapes backslashes and line breaks (none of CouchDB's have any).
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
}

pub(super) fn sample(
    out: &mut String,
    name: &str,
    label: Option<(&str, &str)>,
    value: impl std::fmt::Display,
) {
    // Label values here are method names, status codes and fixed words:
    // nothing to escape.
    let _ = match label {
        Some((key, value_of_label)) => {
            writeln!(out, "{name}{{{key}=\"{value_of_label}\"}} {value}")
        }
        None => writeln!(out, "{name} {value}"),
    };
}
