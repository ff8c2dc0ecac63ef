//! A parsed query (Lucene's syntax, `query_syntax`) made into tantivy's
//! queries, field by field as the index knows them: text is analyzed with
//! the field's analyzer, strings match whole, doubles are numeric points
//! and ranges, stored fields and names never indexed match nothing.

use std::ops::Bound;
use std::sync::Arc;

use tantivy::Term;
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, EmptyQuery, ExistsQuery, Occur as TOccur, PhraseQuery,
    Query, RangeQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};

use crate::definition::IndexDefinition;
use crate::query_syntax::{Endpoint, Node, Occur, WildPiece};
use crate::schema::{self, Fields, Kind, Registry};
use crate::term_filter::{TermFilterQuery, TermTest, within_edits};
use crate::{SearchError, analyzer};

/// The field of words without one.
pub const DEFAULT_FIELD: &str = "default";

/// Builds queries for one index as it stands.
pub struct QueryBuilder<'a> {
    pub def: &'a IndexDefinition,
    pub fields: &'a Fields,
    pub registry: &'a Registry,
}

type Built = Box<dyn Query>;

impl QueryBuilder<'_> {
    /// The query a parsed query means here.
    pub fn build(&self, node: &Node) -> Result<Built, SearchError> {
        self.node(node, None)
    }

    fn node(&self, node: &Node, outer: Option<&str>) -> Result<Built, SearchError> {
        let field = |own: &Option<String>| -> String {
            own.as_deref()
                .or(outer)
                .unwrap_or(DEFAULT_FIELD)
                .to_string()
        };
        Ok(match node {
            Node::All => Box::new(AllQuery),
            Node::Boolean(clauses) => {
                let mut built = Vec::with_capacity(clauses.len());
                for (occur, clause) in clauses {
                    let occur = match occur {
                        Occur::Should => TOccur::Should,
                        Occur::Must => TOccur::Must,
                        Occur::MustNot => TOccur::MustNot,
                    };
                    built.push((occur, self.node(clause, outer)?));
                }
                Box::new(BooleanQuery::new(built))
            }
            Node::Boost(inner, boost) => {
                Box::new(BoostQuery::new(self.node(inner, outer)?, *boost))
            }
            Node::Term { field: own, text } => self.word(&field(own), text)?,
            Node::Phrase {
                field: own,
                text,
                slop,
            } => self.phrase(&field(own), text, *slop)?,
            Node::Wildcard {
                field: own,
                pattern,
            } => self.wildcard(&field(own), pattern)?,
            Node::Fuzzy {
                field: own,
                text,
                distance,
            } => self.fuzzy(&field(own), text, *distance)?,
            Node::Regex {
                field: own,
                pattern,
            } => self.regex(&field(own), pattern)?,
            Node::Range {
                field: own,
                lower,
                upper,
            } => self.range(&field(own), lower, upper)?,
        })
    }

    /// The text field a text name's terms live in.
    fn text_field(&self, name: &str) -> Option<Field> {
        self.fields.text(self.def.analyzer_of(name))
    }

    /// The tokens of `text` as the field's analyzer makes them, with their
    /// positions.
    fn tokens(&self, name: &str, text: &str) -> Result<Vec<(usize, String)>, SearchError> {
        let mut analyzer = analyzer(self.def.analyzer_of(name))
            .map_err(|e| SearchError::BadRequest(e.to_string()))?;
        let mut stream = analyzer.token_stream(text);
        let mut tokens = Vec::new();
        while stream.advance() {
            let token = stream.token();
            tokens.push((token.position, token.text.clone()));
        }
        Ok(tokens)
    }

    fn word(&self, name: &str, text: &str) -> Result<Built, SearchError> {
        match self.registry.get(name) {
            Some(Kind::Text) => {
                let Some(field) = self.text_field(name) else {
                    return Ok(Box::new(EmptyQuery));
                };
                let tokens = self.tokens(name, text)?;
                let mut terms: Vec<Built> = tokens
                    .iter()
                    .map(|(_, token)| term_query(str_term(field, name, token)))
                    .collect();
                Ok(match terms.len() {
                    0 => Box::new(EmptyQuery),
                    1 => terms.remove(0),
                    _ => Box::new(BooleanQuery::new(
                        terms.into_iter().map(|t| (TOccur::Should, t)).collect(),
                    )),
                })
            }
            Some(Kind::String) => Ok(term_query(str_term(self.fields.strings, name, text))),
            Some(Kind::Double) => {
                let value = number(name, text)?;
                let term = f64_term(self.fields.doubles, name, value);
                Ok(Box::new(RangeQuery::new(
                    Bound::Included(term.clone()),
                    Bound::Included(term),
                )))
            }
            Some(Kind::Stored) | None => Ok(Box::new(EmptyQuery)),
        }
    }

    fn phrase(&self, name: &str, text: &str, slop: u32) -> Result<Built, SearchError> {
        if self.registry.get(name) != Some(Kind::Text) {
            return self.word(name, text);
        }
        let Some(field) = self.text_field(name) else {
            return Ok(Box::new(EmptyQuery));
        };
        let tokens = self.tokens(name, text)?;
        Ok(match tokens.len() {
            0 => Box::new(EmptyQuery),
            1 => term_query(str_term(field, name, &tokens[0].1)),
            _ => {
                let first = tokens[0].0;
                let terms = tokens
                    .iter()
                    .map(|(position, token)| (position - first, str_term(field, name, token)))
                    .collect();
                Box::new(PhraseQuery::new_with_offset_and_slop(terms, slop))
            }
        })
    }

    /// The field and path prefix a name's string terms start with, and
    /// whether its terms are lowercased (wildcards and fuzzy terms are not
    /// analyzed, only normalized as Lucene normalizes them).
    fn term_space(&self, name: &str) -> Option<(Field, Vec<u8>, bool)> {
        let (field, lowercase) = match self.registry.get(name)? {
            Kind::Text => {
                let analyzer = self.def.analyzer_of(name);
                (
                    self.text_field(name)?,
                    !matches!(analyzer, "keyword" | "whitespace"),
                )
            }
            Kind::String => (self.fields.strings, false),
            Kind::Double | Kind::Stored => return None,
        };
        let prefix = str_term(field, name, "").serialized_value_bytes().to_vec();
        Some((field, prefix, lowercase))
    }

    fn wildcard(&self, name: &str, pattern: &[WildPiece]) -> Result<Built, SearchError> {
        if pattern == [WildPiece::AnyMany] {
            return Ok(self.exists(name));
        }
        let Some((field, prefix, lowercase)) = self.term_space(name) else {
            return Ok(Box::new(EmptyQuery));
        };
        let mut re = String::from("^(?s:");
        for piece in pattern {
            match piece {
                WildPiece::AnyMany => re.push_str(".*"),
                WildPiece::AnyOne => re.push('.'),
                WildPiece::Literal(c) => {
                    let c = if lowercase {
                        c.to_lowercase().collect::<String>()
                    } else {
                        c.to_string()
                    };
                    re.push_str(&regex::escape(&c));
                }
            }
        }
        re.push_str(")$");
        let compiled = regex::bytes::Regex::new(&re)
            .map_err(|e| SearchError::QueryParse(format!("bad wildcard: {e}")))?;
        let test: TermTest = Arc::new(move |term: &[u8]| compiled.is_match(term));
        Ok(Box::new(TermFilterQuery::new(field, prefix, test)))
    }

    fn regex(&self, name: &str, pattern: &str) -> Result<Built, SearchError> {
        let Some((field, prefix, _)) = self.term_space(name) else {
            return Ok(Box::new(EmptyQuery));
        };
        let compiled = regex::bytes::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(1 << 20)
            .build()
            .map_err(|e| SearchError::QueryParse(format!("bad regular expression: {e}")))?;
        let test: TermTest = Arc::new(move |term: &[u8]| compiled.is_match(term));
        Ok(Box::new(TermFilterQuery::new(field, prefix, test)))
    }

    fn fuzzy(&self, name: &str, text: &str, distance: u8) -> Result<Built, SearchError> {
        let Some((field, prefix, lowercase)) = self.term_space(name) else {
            return Ok(Box::new(EmptyQuery));
        };
        let wanted: Vec<char> = if lowercase {
            text.to_lowercase().chars().collect()
        } else {
            text.chars().collect()
        };
        let max = usize::from(distance.min(2));
        let test: TermTest = Arc::new(move |term: &[u8]| {
            std::str::from_utf8(term)
                .is_ok_and(|term| within_edits(&term.chars().collect::<Vec<_>>(), &wanted, max))
        });
        Ok(Box::new(TermFilterQuery::new(field, prefix, test)))
    }

    /// `name:*`: documents that have the field.
    fn exists(&self, name: &str) -> Built {
        match self.registry.get(name) {
            Some(Kind::Double) => Box::new(ExistsQuery::new(schema::column("d", name), false)),
            Some(Kind::String) => Box::new(ExistsQuery::new(schema::column("s", name), false)),
            Some(Kind::Text) => match self.term_space(name) {
                Some((field, prefix, _)) => Box::new(TermFilterQuery::new(
                    field,
                    prefix,
                    Arc::new(|_: &[u8]| true),
                )),
                None => Box::new(EmptyQuery),
            },
            Some(Kind::Stored) | None => Box::new(EmptyQuery),
        }
    }

    fn range(&self, name: &str, lower: &Endpoint, upper: &Endpoint) -> Result<Built, SearchError> {
        if matches!((lower, upper), (Endpoint::Open, Endpoint::Open)) {
            return Ok(self.exists(name));
        }
        match self.registry.get(name) {
            Some(Kind::Double) => {
                let bound = |end: &Endpoint| -> Result<Bound<Term>, SearchError> {
                    Ok(match end {
                        Endpoint::Open => Bound::Unbounded,
                        Endpoint::Included(text) => Bound::Included(f64_term(
                            self.fields.doubles,
                            name,
                            number(name, text)?,
                        )),
                        Endpoint::Excluded(text) => Bound::Excluded(f64_term(
                            self.fields.doubles,
                            name,
                            number(name, text)?,
                        )),
                    })
                };
                Ok(Box::new(RangeQuery::new(bound(lower)?, bound(upper)?)))
            }
            Some(Kind::String) => {
                let field = self.fields.strings;
                let bound = |end: &Endpoint| match end {
                    Endpoint::Open => Bound::Unbounded,
                    Endpoint::Included(text) => Bound::Included(str_term(field, name, text)),
                    Endpoint::Excluded(text) => Bound::Excluded(str_term(field, name, text)),
                };
                Ok(Box::new(RangeQuery::new(bound(lower), bound(upper))))
            }
            Some(Kind::Text) => {
                // Term ranges over the analyzed terms, as Lucene's.
                let Some((field, prefix, lowercase)) = self.term_space(name) else {
                    return Ok(Box::new(EmptyQuery));
                };
                let norm = |text: &str| {
                    if lowercase {
                        text.to_lowercase().into_bytes()
                    } else {
                        text.as_bytes().to_vec()
                    }
                };
                let (lower, upper) = (endpoint_bytes(lower, &norm), endpoint_bytes(upper, &norm));
                let test: TermTest = Arc::new(move |term: &[u8]| {
                    let above = match &lower {
                        Bound::Unbounded => true,
                        Bound::Included(b) => term >= b.as_slice(),
                        Bound::Excluded(b) => term > b.as_slice(),
                    };
                    let below = match &upper {
                        Bound::Unbounded => true,
                        Bound::Included(b) => term <= b.as_slice(),
                        Bound::Excluded(b) => term < b.as_slice(),
                    };
                    above && below
                });
                Ok(Box::new(TermFilterQuery::new(field, prefix, test)))
            }
            Some(Kind::Stored) | None => Ok(Box::new(EmptyQuery)),
        }
    }
}

fn endpoint_bytes(end: &Endpoint, norm: &dyn Fn(&str) -> Vec<u8>) -> Bound<Vec<u8>> {
    match end {
        Endpoint::Open => Bound::Unbounded,
        Endpoint::Included(text) => Bound::Included(norm(text)),
        Endpoint::Excluded(text) => Bound::Excluded(norm(text)),
    }
}

fn term_query(term: Term) -> Built {
    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
}

/// A string term of `name` in a JSON field.
pub(crate) fn str_term(field: Field, name: &str, text: &str) -> Term {
    let mut term = Term::from_field_json_path(field, &schema::path(name), false);
    term.append_type_and_str(text);
    term
}

fn f64_term(field: Field, name: &str, value: f64) -> Term {
    let mut term = Term::from_field_json_path(field, &schema::path(name), false);
    term.append_type_and_fast_value(value);
    term
}

/// A double field's value in a query, or Lucene's refusal.
fn number(name: &str, text: &str) -> Result<f64, SearchError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .ok_or_else(|| {
            SearchError::QueryParse(format!(
                "could not parse '{text}' as a number for field {name}"
            ))
        })
}
