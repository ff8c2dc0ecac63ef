//! The analyzers CouchDB's search services name, built from tantivy's
//! token filters over tokenizers of our own where Lucene's differ:
//!
//! - `standard`: Unicode's word boundaries (UAX #29, as Lucene's
//!   StandardTokenizer), lowercased, tokens over 255 bytes dropped;
//! - `keyword`: the whole text as one token;
//! - `simple`: runs of letters, lowercased; `simple_asciifolding` folds
//!   accents too;
//! - `whitespace`: runs of anything but whitespace, as written;
//! - `classic` and `email`: `standard` plus English stop words, and for
//!   `email` e-mail addresses and URLs kept whole (close to Lucene's
//!   ClassicAnalyzer and UAX29URLEmailAnalyzer, not their grammars);
//! - a language's name: `standard`, that language's stop words where
//!   tantivy has them, and its Snowball stemmer.
//!
//! Lucene's other language analyzers (see [`UNAVAILABLE`]) have no
//! stemmer here: naming one is refused rather than answered differently.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, Stemmer,
    StopWordFilter, TextAnalyzer, Token, TokenStream, Tokenizer, WhitespaceTokenizer,
};
use unicode_segmentation::UnicodeSegmentation;

/// Longest token kept, in bytes (Lucene's `maxTokenLength`).
const MAX_TOKEN: usize = 255;

/// The languages with a stemmer here, by the name CouchDB gives them.
const LANGUAGES: &[(&str, Language)] = &[
    ("arabic", Language::Arabic),
    ("danish", Language::Danish),
    ("dutch", Language::Dutch),
    ("english", Language::English),
    ("finnish", Language::Finnish),
    ("french", Language::French),
    ("german", Language::German),
    ("greek", Language::Greek),
    ("hungarian", Language::Hungarian),
    ("italian", Language::Italian),
    ("norwegian", Language::Norwegian),
    ("portuguese", Language::Portuguese),
    ("romanian", Language::Romanian),
    ("russian", Language::Russian),
    ("spanish", Language::Spanish),
    ("swedish", Language::Swedish),
    ("turkish", Language::Turkish),
];

/// CouchDB's analyzers that Recliner does not have: no stemmer or word
/// breaker for them is in the engine.
pub const UNAVAILABLE: &[&str] = &[
    "armenian",
    "basque",
    "brazilian",
    "bulgarian",
    "catalan",
    "chinese",
    "cjk",
    "czech",
    "galician",
    "hindi",
    "indonesian",
    "irish",
    "japanese",
    "latvian",
    "persian",
    "polish",
    "thai",
];

/// An analyzer name no search here knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} not a valid analyzer")]
pub struct UnknownAnalyzer(pub String);

/// The analyzer called `name`.
pub fn analyzer(name: &str) -> Result<TextAnalyzer, UnknownAnalyzer> {
    let standard = || {
        TextAnalyzer::builder(WordTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN + 1))
            .filter(LowerCaser)
    };
    Ok(match name {
        "standard" => standard().build(),
        "keyword" => TextAnalyzer::builder(RawTokenizer::default()).build(),
        "simple" => TextAnalyzer::builder(LetterTokenizer::default())
            .filter(LowerCaser)
            .build(),
        "simple_asciifolding" => TextAnalyzer::builder(LetterTokenizer::default())
            .filter(LowerCaser)
            .filter(AsciiFoldingFilter)
            .build(),
        "whitespace" => TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
        "classic" => standard().filter(english_stop_words()).build(),
        "email" => TextAnalyzer::builder(EmailTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN + 1))
            .filter(LowerCaser)
            .filter(english_stop_words())
            .build(),
        other => {
            let Some((_, language)) = LANGUAGES.iter().find(|(n, _)| *n == other) else {
                return Err(UnknownAnalyzer(other.to_string()));
            };
            let builder = standard().dynamic();
            let builder = match StopWordFilter::new(*language) {
                Some(stop) => builder.filter_dynamic(stop),
                None => builder,
            };
            builder.filter_dynamic(Stemmer::new(*language)).build()
        }
    })
}

fn english_stop_words() -> StopWordFilter {
    StopWordFilter::new(Language::English).unwrap_or_else(|| StopWordFilter::remove(Vec::new()))
}

/// The tokens `name` makes of `text` (`_nouveau_analyze`, `_search_analyze`).
pub fn analyze(name: &str, text: &str) -> Result<Vec<String>, UnknownAnalyzer> {
    let mut analyzer = analyzer(name)?;
    let mut stream = analyzer.token_stream(text);
    let mut tokens = Vec::new();
    while stream.advance() {
        tokens.push(stream.token().text.clone());
    }
    Ok(tokens)
}

/// Tokens found by a splitter as byte ranges, handed out one by one.
struct RangeStream<'a> {
    text: &'a str,
    ranges: std::vec::IntoIter<(usize, usize)>,
    token: &'a mut Token,
}

impl<'a> RangeStream<'a> {
    fn new(text: &'a str, ranges: Vec<(usize, usize)>, token: &'a mut Token) -> RangeStream<'a> {
        token.reset();
        RangeStream {
            text,
            ranges: ranges.into_iter(),
            token,
        }
    }
}

impl TokenStream for RangeStream<'_> {
    fn advance(&mut self) -> bool {
        let Some((from, to)) = self.ranges.next() else {
            return false;
        };
        self.token.text.clear();
        self.token.text.push_str(&self.text[from..to]);
        self.token.offset_from = from;
        self.token.offset_to = to;
        self.token.position = self.token.position.wrapping_add(1);
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Unicode's words (UAX #29): what lies between word boundaries and holds
/// a letter or a digit (`O'Neil` and `renovations.com` stay whole).
fn words(text: &str) -> Vec<(usize, usize)> {
    text.split_word_bound_indices()
        .filter(|(_, word)| word.chars().any(char::is_alphanumeric))
        .map(|(at, word)| (at, at + word.len()))
        .collect()
}

/// Lucene's standard tokenizer's words: Unicode's word boundaries.
#[derive(Clone, Default)]
struct WordTokenizer {
    token: Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = RangeStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> RangeStream<'a> {
        RangeStream::new(text, words(text), &mut self.token)
    }
}

/// Lucene's letter tokenizer: runs of letters.
#[derive(Clone, Default)]
struct LetterTokenizer {
    token: Token,
}

impl Tokenizer for LetterTokenizer {
    type TokenStream<'a> = RangeStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> RangeStream<'a> {
        let mut ranges = Vec::new();
        let mut start = None;
        for (at, c) in text.char_indices() {
            match (c.is_alphabetic(), start) {
                (true, None) => start = Some(at),
                (false, Some(from)) => {
                    ranges.push((from, at));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(from) = start {
            ranges.push((from, text.len()));
        }
        RangeStream::new(text, ranges, &mut self.token)
    }
}

/// Words, but e-mail addresses and URLs whole (`email`).
#[derive(Clone, Default)]
struct EmailTokenizer {
    token: Token,
}

fn whole_tokens() -> &'static regex::Regex {
    static WHOLE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    WHOLE.get_or_init(|| {
        // An address (local part, `@`, dotted domain) or a URL with a scheme.
        regex::Regex::new(
            r"(?i)[a-z0-9!#$%&'*+/=?^_`{|}~.-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+|[a-z][a-z0-9+.-]*://[^\s<>\x22]+",
        )
        .unwrap_or_else(|_| regex::Regex::new("$^").unwrap_or_else(|_| unreachable!()))
    })
}

impl Tokenizer for EmailTokenizer {
    type TokenStream<'a> = RangeStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> RangeStream<'a> {
        let mut ranges = Vec::new();
        let mut at = 0;
        for found in whole_tokens().find_iter(text) {
            ranges.extend(
                words(&text[at..found.start()])
                    .into_iter()
                    .map(|(from, to)| (from + at, to + at)),
            );
            ranges.push((found.start(), found.end()));
            at = found.end();
        }
        ranges.extend(
            words(&text[at..])
                .into_iter()
                .map(|(from, to)| (from + at, to + at)),
        );
        RangeStream::new(text, ranges, &mut self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(name: &str, text: &str) -> Vec<String> {
        analyze(name, text).unwrap()
    }

    #[test]
    fn the_standard_analyzer_splits_on_unicode_word_boundaries_and_lowercases() {
        // CouchDB's own examples.
        assert_eq!(tokens("standard", "hello there"), ["hello", "there"]);
        assert_eq!(
            tokens("standard", "ablanks@renovations.com"),
            ["ablanks", "renovations.com"]
        );
        assert_eq!(
            tokens("standard", "O'Neil's 3.5 Café, naïve—ÜBER!"),
            ["o'neil's", "3.5", "café", "naïve", "über"]
        );
        assert_eq!(tokens("standard", "  ,;  "), Vec::<String>::new());
        let long = "x".repeat(300);
        assert_eq!(tokens("standard", &format!("a {long} b")), ["a", "b"]);
    }

    #[test]
    fn keyword_whitespace_and_simple_keep_what_lucene_keeps() {
        assert_eq!(
            tokens("keyword", "ablanks@renovations.com"),
            ["ablanks@renovations.com"]
        );
        assert_eq!(
            tokens("whitespace", "Hello  There,you"),
            ["Hello", "There,you"]
        );
        assert_eq!(tokens("simple", "R2-D2 Café"), ["r", "d", "café"]);
        assert_eq!(
            tokens("simple_asciifolding", "R2-D2 Café"),
            ["r", "d", "cafe"]
        );
    }

    #[test]
    fn language_analyzers_drop_stop_words_and_stem() {
        assert_eq!(
            tokens("english", "The runners were running quickly"),
            ["runner", "were", "run", "quick"]
        );
        assert_eq!(tokens("french", "les chevaux"), ["cheval"]);
        assert_eq!(tokens("german", "Häuser"), ["haus"]);
    }

    #[test]
    fn email_keeps_addresses_and_urls_whole() {
        assert_eq!(
            tokens(
                "email",
                "Write to Ann.Lee@Example.com or see https://example.com/a?b=1 for the rest"
            ),
            [
                "write",
                "ann.lee@example.com",
                "see",
                "https://example.com/a?b=1",
                "rest"
            ]
        );
        assert_eq!(tokens("classic", "The Quick fox"), ["quick", "fox"]);
    }

    #[test]
    fn unknown_and_unavailable_analyzers_are_refused_by_name() {
        for name in ["nope", "japanese", "Standard"] {
            assert_eq!(
                analyze(name, "x").unwrap_err().to_string(),
                format!("{name} not a valid analyzer")
            );
        }
        for name in UNAVAILABLE {
            assert!(analyzer(name).is_err(), "{name}");
        }
    }
}
