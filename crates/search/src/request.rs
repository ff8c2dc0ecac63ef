//! Running a search on an index: the query as the index reads it, scoped
//! to a partition and to what the reader may see, collected in one pass.

use std::collections::{BTreeMap, HashMap};

use design_functions::search::SearchApi;
use serde_json::{Map, Value};
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, TermQuery, TermSetQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{TantivyDocument, Term};

use crate::SearchError;
use crate::collect::{Collect, RangeSpec, SortKey, SortValue};
use crate::index::{SearchIndex, engine};
use crate::query::QueryBuilder;
use crate::query_syntax;
use crate::reader_stats::ReaderStatistics;
use crate::schema::{self, Kind};

/// The most ranges one search may count.
pub const MAX_RANGES: usize = 1_000;
/// The most fields one search may count values of.
pub const MAX_COUNTS: usize = 100;
/// The most clauses one query may hold (Lucene's `maxClauseCount`).
pub const MAX_CLAUSES: usize = 1_024;
/// The most clauses that expand over the term dictionary (wildcards,
/// fuzzy words, regular expressions) one query may hold: each walks the
/// dictionary, so their number bounds a query's cost.
pub const MAX_EXPANDING: usize = 64;

/// A query's clauses, and those among them that expand.
fn clauses_of(node: &query_syntax::Node) -> (usize, usize) {
    use query_syntax::Node;
    match node {
        Node::Boolean(parts) => parts.iter().fold((0, 0), |(all, expanding), (_, part)| {
            let (a, e) = clauses_of(part);
            (all.saturating_add(a), expanding.saturating_add(e))
        }),
        Node::Boost(inner, _) => clauses_of(inner),
        Node::Wildcard { .. } | Node::Fuzzy { .. } | Node::Regex { .. } => (1, 1),
        Node::All | Node::Term { .. } | Node::Phrase { .. } | Node::Range { .. } => (1, 0),
    }
}

/// A sort key as a request names it.
#[derive(Debug, Clone, PartialEq)]
pub enum SortSpec {
    Score { descending: bool },
    Field { name: String, descending: bool },
}

/// A search, in the engine's terms.
#[derive(Debug, Clone, Default)]
pub struct SearchRequest {
    /// Lucene's query syntax.
    pub query: String,
    pub limit: usize,
    /// Empty: by score, best first. `_id` is always the last key.
    pub sort: Vec<SortSpec>,
    pub after: Option<Vec<SortValue>>,
    pub counts: Vec<String>,
    pub top_n: usize,
    pub ranges: Vec<(String, Vec<RangeSpec>)>,
    pub partition: Option<String>,
    /// Clouseau's `drilldown`: each entry a string field and values, one
    /// of which a hit must have; every entry must hold.
    pub drilldown: Vec<(String, Vec<String>)>,
    /// Set when nobody waits for the answer any more (see `Collect`).
    pub cancel: Option<crate::collect::Cancel>,
}

/// A hit: its id, its sort values, its stored fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    pub order: Vec<SortValue>,
    pub fields: Map<String, Value>,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    pub total: u64,
    pub hits: Vec<Hit>,
    /// By name: values and their counts, most frequent first (`top_n`).
    pub counts: Vec<(String, Vec<(String, u64)>)>,
    /// By name: each range's label and count, in the request's order.
    pub ranges: Vec<(String, Vec<(String, u64)>)>,
}

impl SearchIndex {
    /// Runs `request` on what the index has committed (blocking).
    pub fn search(&self, request: &SearchRequest) -> Result<SearchResults, SearchError> {
        // Each range and each counted field is work for every match: bound
        // them, so one request cannot hold a core for minutes.
        let ranges: usize = request.ranges.iter().map(|(_, specs)| specs.len()).sum();
        if ranges > MAX_RANGES {
            return Err(SearchError::QueryParse(format!(
                "too many ranges: at most {MAX_RANGES}"
            )));
        }
        if request.counts.len() > MAX_COUNTS {
            return Err(SearchError::QueryParse(format!(
                "too many fields to count: at most {MAX_COUNTS}"
            )));
        }
        let committed = self.committed();
        let fields = self.fields();
        let parsed =
            query_syntax::parse(&request.query).map_err(|e| SearchError::BadRequest(e.0))?;
        let (clauses, expanding) = clauses_of(&parsed);
        if clauses > MAX_CLAUSES {
            return Err(SearchError::QueryParse(format!(
                "too many clauses: at most {MAX_CLAUSES}"
            )));
        }
        if expanding > MAX_EXPANDING {
            return Err(SearchError::QueryParse(format!(
                "too many wildcard, fuzzy or regular expression clauses: at most {MAX_EXPANDING}"
            )));
        }
        let builder = QueryBuilder {
            def: self.definition(),
            fields,
            registry: &committed.registry,
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, builder.build(&parsed)?)];
        if let Some(partition) = &request.partition {
            clauses.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(fields.partition, partition),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        for (name, values) in &request.drilldown {
            let terms = values
                .iter()
                .map(|value| crate::query::str_term(fields.strings, name, value));
            clauses.push((Occur::Must, Box::new(TermSetQuery::new(terms))));
        }
        let access_terms = self.access_terms();
        if let Some(terms) = &access_terms {
            // A filter, not a scored clause: it adds nothing to a score.
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(TermSetQuery::new(terms.clone())),
                    0.0,
                )),
            ));
        }
        let query = BooleanQuery::new(clauses);

        let mut sort = Vec::with_capacity(request.sort.len() + 1);
        for spec in &request.sort {
            sort.push(match spec {
                SortSpec::Score { descending } => SortKey::Score {
                    descending: *descending,
                },
                SortSpec::Field { name, descending } if name == "_id" => SortKey::Str {
                    column: "_id".into(),
                    descending: *descending,
                },
                SortSpec::Field { name, descending } => match committed.registry.get(name) {
                    Some(Kind::String) => SortKey::Str {
                        column: schema::column("s", name),
                        descending: *descending,
                    },
                    Some(Kind::Double) => SortKey::Double {
                        column: schema::column("d", name),
                        descending: *descending,
                    },
                    // Clouseau keeps a string's value whole beside its
                    // analyzed text, so its text fields sort too.
                    Some(Kind::Text) if self.definition().api == SearchApi::Clouseau => {
                        SortKey::Str {
                            column: schema::column("s", name),
                            descending: *descending,
                        }
                    }
                    Some(Kind::Text | Kind::Stored) => {
                        return Err(SearchError::BadRequest(format!(
                            "can't sort on field {name}"
                        )));
                    }
                    None => SortKey::Constant,
                },
            });
        }
        if sort.is_empty() {
            sort.push(SortKey::Score { descending: true });
        }
        if !matches!(sort.last(), Some(SortKey::Str { column, .. }) if column == "_id") {
            sort.push(SortKey::Str {
                column: "_id".into(),
                descending: false,
            });
        }
        let collect = Collect {
            sort,
            limit: request.limit,
            after: request.after.clone(),
            counts: request
                .counts
                .iter()
                .map(|name| (name.clone(), schema::column("s", name)))
                .collect(),
            ranges: request
                .ranges
                .iter()
                .map(|(name, specs)| (name.clone(), schema::column("d", name), specs.clone()))
                .collect(),
            cancel: request.cancel.clone(),
        };
        let searcher = self.reader().searcher();
        let collected = match &access_terms {
            // Scored by the reader's documents' statistics alone.
            Some(terms) => {
                let stats = ReaderStatistics::new(&searcher, terms).map_err(engine)?;
                searcher.search_with_statistics_provider(&query, &collect, &stats)
            }
            None => searcher.search(&query, &collect),
        }
        .map_err(engine)?;
        let mut hits = Vec::with_capacity(collected.hits.len());
        for (address, order) in collected.hits {
            let doc: TantivyDocument = searcher.doc(address).map_err(engine)?;
            let id = doc
                .get_first(fields.id)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            let stored = doc
                .get_first(fields.stored)
                .and_then(|v| v.as_bytes())
                .unwrap_or_default();
            hits.push(Hit {
                id,
                order,
                fields: stored_fields(stored),
            });
        }
        let counts = request
            .counts
            .iter()
            .map(|name| {
                let mut values: Vec<(String, u64)> = collected
                    .counts
                    .get(name)
                    .cloned()
                    .unwrap_or_else(HashMap::new)
                    .into_iter()
                    .collect();
                values.sort_by(|(a, x), (b, y)| y.cmp(x).then_with(|| a.cmp(b)));
                values.truncate(request.top_n);
                (name.clone(), values)
            })
            .collect();
        let ranges = request
            .ranges
            .iter()
            .map(|(name, specs)| {
                let counts = collected.ranges.get(name);
                let mut labelled: Vec<(String, u64)> = specs
                    .iter()
                    .enumerate()
                    .map(|(i, spec)| {
                        (
                            spec.label.clone(),
                            counts.and_then(|c| c.get(i)).copied().unwrap_or(0),
                        )
                    })
                    .collect();
                // The most frequent `top_n`, as Lucene's top children
                // (a stable sort keeps the request's order among ties).
                labelled.sort_by(|(_, x), (_, y)| y.cmp(x));
                labelled.truncate(request.top_n);
                (name.clone(), labelled)
            })
            .collect();
        Ok(SearchResults {
            total: collected.total,
            hits,
            counts,
            ranges,
        })
    }
}

/// Stored fields by name: one value as itself, several as an array;
/// numbers as doubles, as Lucene stores them.
fn stored_fields(bytes: &[u8]) -> Map<String, Value> {
    let pairs: Vec<(String, Value)> =
        serde_json::from_slice::<Vec<(String, Value)>>(bytes).unwrap_or_default();
    let mut grouped: BTreeMap<usize, (String, Vec<Value>)> = BTreeMap::new();
    let mut first_at: HashMap<String, usize> = HashMap::new();
    for (i, (name, value)) in pairs.into_iter().enumerate() {
        let value = match value.as_f64() {
            Some(number) if value.is_number() => Value::from(number),
            _ => value,
        };
        let at = *first_at.entry(name.clone()).or_insert(i);
        grouped
            .entry(at)
            .or_insert_with(|| (name, Vec::new()))
            .1
            .push(value);
    }
    grouped
        .into_values()
        .map(|(name, mut values)| {
            let value = if values.len() == 1 {
                values.remove(0)
            } else {
                Value::Array(values)
            };
            (name, value)
        })
        .collect()
}
