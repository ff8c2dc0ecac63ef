use super::*;
use replicator::scheduler::JobCounts;
use serde_json::json;

fn gauges() -> Gauges {
    Gauges {
        open_databases: 3,
        jobs: JobCounts {
            running: 2,
            pending: 1,
            crashing: 1,
        },
    }
}

#[test]
fn the_bins_are_couchdbs_230_and_each_holds_its_values() {
    assert_eq!(BINS, 230);
    assert_eq!(bin_of(0.0), 0);
    assert_eq!(bin_of(f64::NAN), 0);
    assert_eq!(bin_of(1e12), BINS - 1);
    for value in [0.01, 0.42, 1.0, 4.2, 10.42, 999.9, 123_456.0] {
        let bin = bin_of(value);
        assert!(bin_min(bin) <= value && value <= bin_max(bin), "{value}");
        assert!(bin_min(bin) < bin_middle(bin) && bin_middle(bin) < bin_max(bin));
    }
    // Neighbouring bins meet without gaps.
    assert!(bin_max(40) < bin_min(41));
    assert_eq!(bin_max(40).next_up(), bin_min(41));
}

#[test]
fn a_summary_without_samples_is_couchdbs_all_zero_shape() {
    let summary = Summary::of(&[0; BINS]);
    assert_eq!(summary.n, 0);
    assert_eq!(
        summary.to_json(),
        json!({"n": 0, "min": 0, "max": 0, "arithmetic_mean": 0, "geometric_mean": 0,
               "harmonic_mean": 0, "median": 0, "variance": 0, "standard_deviation": 0,
               "skewness": 0, "kurtosis": 0,
               "percentile": [[50, 0], [75, 0], [90, 0], [95, 0], [99, 0], [999, 0]],
               "histogram": [[0, 0]]})
    );
}

#[test]
fn a_summary_is_close_to_the_samples_it_binned() {
    let histogram = Histogram::new();
    let values = [0.05, 0.9, 0.7, 0.7, 10.1, 11.0, 100.5, 0.10, 13.5];
    for value in values {
        histogram.record(5, value);
    }
    let summary = Summary::of(&histogram.window(5));
    assert_eq!(summary.n, values.len() as u64);
    let near = |got: f64, want: f64| (got - want).abs() <= want * 0.1;
    assert!(
        summary.min <= 0.05 && near(summary.min, 0.05),
        "{summary:?}"
    );
    assert!(
        summary.max >= 100.5 && near(summary.max, 104.0),
        "{summary:?}"
    );
    assert!(near(summary.mean, 15.3), "{summary:?}");
    assert!(near(summary.percentiles[0], 0.9), "median {summary:?}");
    let shown = summary.to_json();
    assert_eq!(shown["n"], 9);
    assert_eq!(shown["median"], shown["percentile"][0][1]);
    assert_eq!(shown["percentile"][5][0], 999);
    assert!(shown["standard_deviation"].as_f64().unwrap() > 25.0);
    // One value: no spread to divide by, so CouchDB's zeros.
    let single = Histogram::new();
    single.record(0, 7.0);
    let shown = Summary::of(&single.window(0)).to_json();
    assert_eq!(
        (shown["skewness"].clone(), shown["kurtosis"].clone()),
        (json!(0), json!(0))
    );
}

#[test]
fn samples_leave_the_window_after_ten_seconds() {
    let histogram = Histogram::new();
    histogram.record(100, 1.0);
    histogram.record(105, 1.0);
    histogram.record(105, 2.0);
    let total = |now| histogram.window(now).iter().sum::<u64>();
    assert_eq!(total(105), 3);
    assert_eq!(total(109), 3);
    assert_eq!(total(110), 2);
    assert_eq!(total(115), 0);
    // A slot reused 16 seconds later starts empty.
    histogram.record(121, 5.0);
    assert_eq!(total(121), 1);
}

#[test]
fn requests_count_by_method_and_by_couchdbs_status_codes() {
    let stats = Stats::new();
    let started = Instant::now();
    for _ in 0..3 {
        stats.request_started(&Method::GET);
        stats.request_finished(StatusCode::OK, started);
    }
    stats.request_started(&Method::from_bytes(b"PROPFIND").unwrap());
    stats.request_finished(StatusCode::IM_A_TEAPOT, started);
    stats.request_started(&Method::PUT);
    stats.request_finished(StatusCode::NOT_FOUND, started);
    let shown = to_json(&stats.metrics(&gauges()));
    let couchdb = &shown["couchdb"];
    assert_eq!(couchdb["httpd"]["requests"]["value"], 5);
    assert_eq!(couchdb["httpd_request_methods"]["GET"]["value"], 3);
    assert_eq!(couchdb["httpd_request_methods"]["PUT"]["value"], 1);
    assert_eq!(couchdb["httpd_status_codes"]["200"]["value"], 3);
    assert_eq!(couchdb["httpd_status_codes"]["404"]["value"], 1);
    assert!(couchdb["httpd_status_codes"]["418"].is_null());
    assert_eq!(couchdb["request_time"]["value"]["n"], 5);
    assert_eq!(couchdb["request_time"]["type"], "histogram");
    assert_eq!(
        couchdb["httpd_request_methods"]["GET"],
        json!({"value": 3, "type": "counter", "desc": "number of HTTP GET requests"})
    );
    assert_eq!(
        couchdb["open_databases"],
        json!({"value": 3, "type": "counter", "desc": "number of open databases"})
    );
    assert_eq!(
        shown["couch_replicator"]["jobs"],
        json!({
            "running": {"value": 2, "type": "gauge", "desc": "replicator scheduler running jobs"},
            "pending": {"value": 1, "type": "gauge", "desc": "replicator scheduler pending jobs"},
            "crashed": {"value": 1, "type": "gauge", "desc": "replicator scheduler crashed jobs"},
            "total": {"value": 4, "type": "gauge", "desc": "total number of replicator scheduler jobs"},
        })
    );
}

#[test]
fn documents_count_when_served_or_written() {
    let stats = Stats::new();
    let read = DocAccess {
        read: true,
        write: false,
    };
    let write = DocAccess {
        read: false,
        write: true,
    };
    stats.count_documents(read, StatusCode::OK);
    stats.count_documents(read, StatusCode::NOT_MODIFIED);
    stats.count_documents(read, StatusCode::NOT_FOUND);
    stats.count_documents(write, StatusCode::CREATED);
    stats.count_documents(write, StatusCode::CONFLICT);
    stats.count_bulk_request();
    let shown = to_json(&stats.metrics(&gauges()));
    assert_eq!(shown["couchdb"]["database_reads"]["value"], 2);
    assert_eq!(shown["couchdb"]["database_writes"]["value"], 1);
    assert_eq!(shown["couchdb"]["httpd"]["bulk_requests"]["value"], 1);
    assert!(counts_documents("db"));
    assert!(!counts_documents("_users"));
    assert!(!counts_documents("a/_replicator"));
}

#[test]
fn sub_paths_pick_a_group_a_metric_or_null() {
    let shown = to_json(&Stats::new().metrics(&gauges()));
    let one = extract(shown.clone(), ["couchdb", "httpd_status_codes", "201"]);
    assert_eq!(one["desc"], "number of HTTP 201 Created responses");
    assert_eq!(
        extract(shown.clone(), ["couchdb", "request_time", "value", "n"]),
        json!(0)
    );
    assert!(extract(shown.clone(), ["couchdb", "nope"]).is_null());
    assert!(extract(shown.clone(), ["couchdb", "database_reads", "value", "x"]).is_null());
    assert_eq!(extract(shown.clone(), []), shown);
}

/// Every line a comment or `name{labels} value`; every family declared
/// once before its samples.
fn parse(text: &str) -> Vec<(String, String, f64)> {
    let mut declared = std::collections::HashMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap();
            assert!(
                declared
                    .insert(family.to_string(), kind.to_string())
                    .is_none(),
                "{family} declared twice"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap();
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        let family = ["_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains_key(*f)))
            .unwrap_or(name);
        assert!(declared.contains_key(family), "{line} before its TYPE");
        samples.push((series.to_string(), declared[family].clone(), value));
    }
    samples
}

#[test]
fn the_prometheus_text_uses_couchdbs_names() {
    let stats = Stats::new();
    stats.request_started(&Method::GET);
    stats.request_finished(StatusCode::OK, Instant::now());
    let text = to_prometheus(
        &stats.metrics(&gauges()),
        &System {
            uptime_seconds: 42,
            nodes: 1,
        },
    );
    let samples = parse(&text);
    let find = |series: &str| {
        samples
            .iter()
            .find(|(s, ..)| s == series)
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
            .clone()
    };
    assert_eq!(find("couchdb_httpd_requests_total").2, 1.0);
    assert_eq!(find("couchdb_httpd_requests_total").1, "counter");
    assert_eq!(find("couchdb_httpd_request_methods{method=\"GET\"}").2, 1.0);
    assert_eq!(
        find("couchdb_httpd_request_methods{method=\"GET\"}").1,
        "counter"
    );
    assert_eq!(find("couchdb_httpd_status_codes{code=\"200\"}").2, 1.0);
    assert_eq!(
        find("couchdb_open_databases"),
        ("couchdb_open_databases".into(), "gauge".into(), 3.0)
    );
    assert_eq!(find("couchdb_database_reads_total").1, "counter");
    assert_eq!(find("couchdb_database_writes_total").1, "counter");
    assert_eq!(find("couchdb_httpd_bulk_requests_total").1, "counter");
    assert_eq!(
        find("couchdb_request_time_seconds{quantile=\"0.999\"}").1,
        "summary"
    );
    assert_eq!(find("couchdb_request_time_seconds_count").2, 1.0);
    assert!(find("couchdb_request_time_seconds{quantile=\"0.5\"}").2 < 1.0);
    assert_eq!(find("couchdb_dbinfo_seconds_sum").2, 0.0);
    assert_eq!(
        find("couchdb_couch_replicator_jobs_running"),
        (
            "couchdb_couch_replicator_jobs_running".into(),
            "gauge".into(),
            2.0
        )
    );
    assert_eq!(find("couchdb_couch_replicator_jobs_total").2, 4.0);
    assert_eq!(find("couchdb_uptime_seconds").2, 42.0);
    assert_eq!(find("couchdb_membership{nodes=\"all_nodes\"}").2, 1.0);
    assert!(text.contains(
        "# HELP couchdb_httpd_request_methods number of HTTP requests by method\n\
         # TYPE couchdb_httpd_request_methods counter\n"
    ));
}
