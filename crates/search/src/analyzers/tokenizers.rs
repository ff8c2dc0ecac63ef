//! The tokenizers the analyzers split text with: Unicode's words (with a
//! fast path for ASCII), letters, e-mail addresses and URLs whole.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use unicode_segmentation::UnicodeSegmentation;

use super::MAX_TOKEN;

/// Tokens found by a splitter as byte ranges, handed out one by one.
pub(super) struct RangeStream<'a> {
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
pub(super) fn words(text: &str) -> Vec<(usize, usize)> {
    if text.is_ascii() {
        return ascii_words(text.as_bytes());
    }
    unicode_words(text)
}

/// [`words`] by Unicode's tables, for any text.
fn unicode_words(text: &str) -> Vec<(usize, usize)> {
    text.split_word_bound_indices()
        .filter(|(_, word)| word.chars().any(char::is_alphanumeric))
        .map(|(at, word)| (at, at + word.len()))
        .collect()
}

/// What a character is to Unicode's word boundaries, for ASCII.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WordClass {
    Letter,
    Digit,
    /// `_` (ExtendNumLet).
    Connector,
    /// `:` (MidLetter): joins letters.
    MidLetter,
    /// `.` and `'` (MidNumLet, Single_Quote): join letters, or digits.
    MidBoth,
    /// `,` and `;` (MidNum): join digits.
    MidDigit,
    Other,
}

fn word_class(byte: u8) -> WordClass {
    match byte {
        b'a'..=b'z' | b'A'..=b'Z' => WordClass::Letter,
        b'0'..=b'9' => WordClass::Digit,
        b'_' => WordClass::Connector,
        b':' => WordClass::MidLetter,
        b'.' | b'\'' => WordClass::MidBoth,
        b',' | b';' => WordClass::MidDigit,
        _ => WordClass::Other,
    }
}

/// [`words`] for ASCII text, without Unicode's tables (most text indexed
/// is ASCII, and the tables' lookups were the tokenizer's cost): letters,
/// digits and `_` join (WB5, WB8-WB10, WB13a/b); `:` joins two letters,
/// `.` and `'` two letters or two digits, `,` and `;` two digits (WB6,
/// WB7, WB11, WB12). A property test checks it against [`words`]' general
/// path.
fn ascii_words(bytes: &[u8]) -> Vec<(usize, usize)> {
    AsciiWords { bytes, at: 0 }.collect()
}

/// [`ascii_words`] one word at a time.
struct AsciiWords<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for AsciiWords<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        use WordClass::*;
        let bytes = self.bytes;
        let mut i = self.at;
        while i < bytes.len() {
            let first = word_class(bytes[i]);
            if !matches!(first, Letter | Digit | Connector) {
                i += 1;
                continue;
            }
            let start = i;
            let mut alnum = first != Connector;
            let mut last = first;
            i += 1;
            while i < bytes.len() {
                let class = word_class(bytes[i]);
                match class {
                    Letter | Digit | Connector => {
                        alnum |= class != Connector;
                        last = class;
                        i += 1;
                    }
                    MidLetter | MidBoth | MidDigit => {
                        let next = bytes.get(i + 1).map_or(Other, |b| word_class(*b));
                        let joins = match class {
                            MidLetter => last == Letter && next == Letter,
                            MidBoth => {
                                (last == Letter && next == Letter)
                                    || (last == Digit && next == Digit)
                            }
                            _ => last == Digit && next == Digit,
                        };
                        if !joins {
                            break;
                        }
                        last = next;
                        i += 2;
                    }
                    Other => break,
                }
            }
            if alnum {
                self.at = i;
                return Some((start, i));
            }
        }
        self.at = i;
        None
    }
}

/// Lucene's standard tokenizer with what every analyzer built on it does
/// first, in one pass: its words, those longer than [`MAX_TOKEN`] bytes
/// left out (their positions counted), lowercased (as tantivy's
/// `LowerCaser`). ASCII text, most text indexed, is split as it is read;
/// the tokenizer and two filters chained cost a sixth of an index build.
#[derive(Clone, Default)]
pub(super) struct StandardTokenizer {
    token: Token,
}

impl Tokenizer for StandardTokenizer {
    type TokenStream<'a> = StandardStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> StandardStream<'a> {
        self.token.reset();
        let words = if text.is_ascii() {
            Words::Ascii(AsciiWords {
                bytes: text.as_bytes(),
                at: 0,
            })
        } else {
            Words::Ranges(unicode_words(text).into_iter())
        };
        StandardStream {
            text,
            words,
            token: &mut self.token,
        }
    }
}

enum Words<'a> {
    Ascii(AsciiWords<'a>),
    Ranges(std::vec::IntoIter<(usize, usize)>),
}

pub(super) struct StandardStream<'a> {
    text: &'a str,
    words: Words<'a>,
    token: &'a mut Token,
}

impl TokenStream for StandardStream<'_> {
    fn advance(&mut self) -> bool {
        loop {
            let next = match &mut self.words {
                Words::Ascii(words) => words.next(),
                Words::Ranges(ranges) => ranges.next(),
            };
            let Some((from, to)) = next else {
                return false;
            };
            self.token.position = self.token.position.wrapping_add(1);
            if to - from > MAX_TOKEN {
                continue;
            }
            let word = &self.text[from..to];
            let text = &mut self.token.text;
            text.clear();
            if word.is_ascii() {
                text.push_str(word);
                text.make_ascii_lowercase();
            } else {
                // Character by character, as `LowerCaser` (no final sigma).
                for c in word.chars() {
                    text.extend(c.to_lowercase());
                }
            }
            self.token.offset_from = from;
            self.token.offset_to = to;
            return true;
        }
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Lucene's standard tokenizer's words: Unicode's word boundaries.
#[derive(Clone, Default)]
pub(super) struct WordTokenizer {
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
pub(super) struct LetterTokenizer {
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
pub(super) struct EmailTokenizer {
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
    use proptest::prelude::*;
    use tantivy::tokenizer::{LowerCaser, RemoveLongFilter, TextAnalyzer};

    use super::*;

    /// Every token's text, offsets and position.
    fn all(mut analyzer: TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push((t.text.clone(), t.offset_from, t.offset_to, t.position));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The ASCII path finds exactly the words Unicode's tables find.
        #[test]
        fn ascii_words_are_unicodes_words(text in "[a-cA-C0-2_:.',; \\-!\"\t]{0,24}") {
            prop_assert_eq!(super::ascii_words(text.as_bytes()), super::unicode_words(&text));
        }

        /// The one-pass standard tokenizer is the word tokenizer, the
        /// long-token filter and the lowercaser chained, on any text.
        #[test]
        fn the_standard_tokenizer_is_words_long_ones_removed_lowercased(
            text in "([a-cA-C0-2_:.',; \\-!\"\tÉéΣσ😀]|x{250,260}){0,12}"
        ) {
            let chained = TextAnalyzer::builder(WordTokenizer::default())
                .filter(RemoveLongFilter::limit(MAX_TOKEN + 1))
                .filter(LowerCaser)
                .build();
            let fused = TextAnalyzer::builder(StandardTokenizer::default()).build();
            prop_assert_eq!(all(fused, &text), all(chained, &text));
        }
    }
}
