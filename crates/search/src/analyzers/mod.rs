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
//!   tantivy has them, and its Snowball stemmer (see [`LANGUAGES`] for
//!   how each differs from Lucene's analyzer of that name);
//! - `cjk`: `standard` with full-width ASCII and half-width katakana
//!   folded, and Chinese, Japanese and Korean runs cut into overlapping
//!   bigrams, as Lucene's CJKAnalyzer.
//!
//! Lucene's other language analyzers (see [`UNAVAILABLE`]) need a
//! dictionary or a stemmer the engine lacks: naming one is refused rather
//! than answered differently.

use std::borrow::Cow;

use frostem::Algorithm;
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, Stemmer,
    StopWordFilter, TextAnalyzer, TextAnalyzerBuilder, Token, TokenFilter, TokenStream, Tokenizer,
    WhitespaceTokenizer,
};

mod tokenizers;

use tokenizers::{EmailTokenizer, LetterTokenizer, StandardTokenizer, WordTokenizer};

/// Longest token kept, in bytes (Lucene's `maxTokenLength`).
const MAX_TOKEN: usize = 255;

/// How a language's words are stemmed.
#[derive(Clone, Copy)]
enum Stem {
    /// By tantivy's stemmer, after its stop words for the language where
    /// it has them.
    Tantivy(Language),
    /// By the Snowball stemmer of `frostem` (what tantivy stems with),
    /// for languages tantivy builds no stemmer for. tantivy has no stop
    /// words for any of them, so none are dropped (Lucene drops its own
    /// list for each).
    Snowball(Algorithm),
}

/// The languages with a stemmer here, by the name CouchDB gives them.
///
/// Where Lucene's analyzer does more than stop words and Snowball:
///
/// - `catalan`: `d'`, `l'`, `m'`, `n'`, `s'`, `t'` are elided, as Lucene
///   does (French and Italian are not, unlike Lucene's);
/// - `irish`: `h`, `n`, `t` alone are dropped, `d'`, `m'`, `b'` elided
///   and `nA…`/`tA…` lowercased as `n-a…`/`t-a…`, as Lucene does;
/// - `czech`, `hindi`, `indonesian`: Lucene stems with light stemmers
///   of its own (Hindi's and Indonesian's from the papers Snowball's
///   follow too), so some stems differ; Lucene's Hindi also normalizes
///   Indic script and digits first, which is not done here;
/// - `persian`: Lucene splits at zero-width non-joiners, normalizes
///   Arabic and Persian letters and digits and (Lucene 9.5 and later)
///   stems with its own stemmer; here only Snowball's stemmer;
/// - `polish`: Lucene stems with Stempel (a trained stemming table);
///   Snowball's Polish stemmer is a different algorithm, so stems differ.
const LANGUAGES: &[(&str, Stem)] = &[
    ("arabic", Stem::Tantivy(Language::Arabic)),
    ("armenian", Stem::Snowball(Algorithm::Armenian)),
    ("basque", Stem::Snowball(Algorithm::Basque)),
    ("catalan", Stem::Snowball(Algorithm::Catalan)),
    ("czech", Stem::Snowball(Algorithm::Czech)),
    ("danish", Stem::Tantivy(Language::Danish)),
    ("dutch", Stem::Tantivy(Language::Dutch)),
    ("english", Stem::Tantivy(Language::English)),
    ("finnish", Stem::Tantivy(Language::Finnish)),
    ("french", Stem::Tantivy(Language::French)),
    ("german", Stem::Tantivy(Language::German)),
    ("greek", Stem::Tantivy(Language::Greek)),
    ("hindi", Stem::Snowball(Algorithm::Hindi)),
    ("hungarian", Stem::Tantivy(Language::Hungarian)),
    ("indonesian", Stem::Snowball(Algorithm::Indonesian)),
    ("irish", Stem::Snowball(Algorithm::Irish)),
    ("italian", Stem::Tantivy(Language::Italian)),
    ("norwegian", Stem::Tantivy(Language::Norwegian)),
    ("persian", Stem::Snowball(Algorithm::Persian)),
    ("polish", Stem::Snowball(Algorithm::Polish)),
    ("portuguese", Stem::Tantivy(Language::Portuguese)),
    ("romanian", Stem::Tantivy(Language::Romanian)),
    ("russian", Stem::Tantivy(Language::Russian)),
    ("spanish", Stem::Tantivy(Language::Spanish)),
    ("swedish", Stem::Tantivy(Language::Swedish)),
    ("turkish", Stem::Tantivy(Language::Turkish)),
];

/// CouchDB's analyzers that Recliner does not have: no stemmer,
/// dictionary or word breaker for them is in the engine (Brazilian's and
/// Galician's, Bulgarian's and Latvian's stemmers are Lucene's own; Chinese,
/// Japanese and Thai need dictionaries to find words).
pub const UNAVAILABLE: &[&str] = &[
    "brazilian",
    "bulgarian",
    "chinese",
    "galician",
    "japanese",
    "latvian",
    "thai",
];

/// Lucene's CJKAnalyzer's stop words: its English ones but `an`, with `s`, `t`, `www`.
const CJK_STOP_WORDS: &[&str] = &[
    "a", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "s", "such", "t", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with", "www",
];

/// An analyzer name no search here knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0} not a valid analyzer")]
pub struct UnknownAnalyzer(pub String);

/// The analyzer called `name`.
pub fn analyzer(name: &str) -> Result<TextAnalyzer, UnknownAnalyzer> {
    let standard = || TextAnalyzer::builder(StandardTokenizer::default());
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
        // Lucene's order: widths folded before lowercasing and bigrams.
        "cjk" => TextAnalyzer::builder(WordTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN + 1))
            .filter(Rewriting(CjkWidth))
            .filter(LowerCaser)
            .filter(CjkBigrams)
            .filter(StopWordFilter::remove(
                CJK_STOP_WORDS.iter().map(|word| word.to_string()),
            ))
            .build(),
        other => {
            let Some((_, stem)) = LANGUAGES.iter().find(|(n, _)| *n == other) else {
                return Err(UnknownAnalyzer(other.to_string()));
            };
            let builder = before_stop_words(other);
            match *stem {
                Stem::Tantivy(language) => {
                    let builder = match StopWordFilter::new(language) {
                        Some(stop) => builder.filter_dynamic(stop),
                        None => builder,
                    };
                    builder.filter_dynamic(Stemmer::new(language)).build()
                }
                Stem::Snowball(algorithm) => builder
                    .filter_dynamic(Rewriting(Snowball(frostem::Stemmer::new(algorithm))))
                    .build(),
            }
        }
    })
}

/// A language analyzer up to its stop words: its words lowercased, and
/// elided where Lucene's analyzer elides.
fn before_stop_words(language: &str) -> TextAnalyzerBuilder {
    let lowercased = || TextAnalyzer::builder(StandardTokenizer::default()).dynamic();
    match language {
        "catalan" => {
            lowercased().filter_dynamic(Rewriting(Elision(&["d", "l", "m", "n", "s", "t"])))
        }
        // Lucene's IrishAnalyzer: `nAthair` is `n-athair`; `h`, `n`, `t`
        // alone are what is left of `h-`, `n-`, `t-` prefixes split off.
        "irish" => TextAnalyzer::builder(WordTokenizer::default())
            .filter(RemoveLongFilter::limit(MAX_TOKEN + 1))
            .dynamic()
            .filter_dynamic(Rewriting(IrishPrefix))
            .filter_dynamic(LowerCaser)
            .filter_dynamic(StopWordFilter::remove(["h", "n", "t"].map(str::to_string)))
            .filter_dynamic(Rewriting(Elision(&["d", "m", "b"]))),
        _ => lowercased(),
    }
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

/// A change to each token's text, made a token filter by [`Rewriting`].
trait Rewrite: Clone + Send + Sync + 'static {
    fn rewrite(&self, text: &mut String);
}

/// [`Rewrite`] as a token filter.
#[derive(Clone)]
struct Rewriting<R>(R);

impl<R: Rewrite> TokenFilter for Rewriting<R> {
    type Tokenizer<T: Tokenizer> = RewritingTokenizer<T, R>;

    fn transform<T: Tokenizer>(self, inner: T) -> RewritingTokenizer<T, R> {
        RewritingTokenizer {
            inner,
            rewrite: self.0,
        }
    }
}

#[derive(Clone)]
struct RewritingTokenizer<T, R> {
    inner: T,
    rewrite: R,
}

impl<T: Tokenizer, R: Rewrite> Tokenizer for RewritingTokenizer<T, R> {
    type TokenStream<'a> = RewritingStream<T::TokenStream<'a>, R>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        RewritingStream {
            tail: self.inner.token_stream(text),
            rewrite: self.rewrite.clone(),
        }
    }
}

struct RewritingStream<S, R> {
    tail: S,
    rewrite: R,
}

impl<S: TokenStream, R: Rewrite> TokenStream for RewritingStream<S, R> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        self.rewrite.rewrite(&mut self.tail.token_mut().text);
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

/// A Snowball stemmer tantivy does not build in (as tantivy's `Stemmer`,
/// on lowercased tokens).
#[derive(Clone)]
struct Snowball(frostem::Stemmer);

impl Rewrite for Snowball {
    fn rewrite(&self, text: &mut String) {
        let stem = match self.0.stem(text) {
            Cow::Owned(stem) => stem,
            Cow::Borrowed(_) => return,
        };
        *text = stem;
    }
}

/// Lucene's ElisionFilter: an article and its apostrophe (`'` or `’`)
/// taken off the front of a lowercased token (`l'home` is `home`).
#[derive(Clone)]
struct Elision(&'static [&'static str]);

impl Rewrite for Elision {
    fn rewrite(&self, text: &mut String) {
        if let Some(at) = text.find(['\'', '\u{2019}'])
            && self.0.contains(&&text[..at])
        {
            let apostrophe = text[at..].chars().next().map_or(1, char::len_utf8);
            text.drain(..at + apostrophe);
        }
    }
}

/// Lucene's IrishLowerCaseFilter, before lowercasing: `n` or `t` before
/// an upper-case vowel is a prefix, kept apart by a hyphen (`nAthair` is
/// `n-Athair`, then `n-athair`), as Irish writes it in lower case.
#[derive(Clone)]
struct IrishPrefix;

impl Rewrite for IrishPrefix {
    fn rewrite(&self, text: &mut String) {
        let mut chars = text.chars();
        if matches!(chars.next(), Some('n' | 't'))
            && matches!(
                chars.next(),
                Some('A' | 'E' | 'I' | 'O' | 'U' | 'Á' | 'É' | 'Í' | 'Ó' | 'Ú')
            )
        {
            text.insert(1, '-');
        }
    }
}

/// Half-width katakana, U+FF65 to U+FF9F, as full-width.
const HALF_WIDTH_KANA: [char; 59] = [
    '・', 'ヲ', 'ァ', 'ィ', 'ゥ', 'ェ', 'ォ', 'ャ', 'ュ', 'ョ', 'ッ', 'ー', 'ア', 'イ', 'ウ', 'エ',
    'オ', 'カ', 'キ', 'ク', 'ケ', 'コ', 'サ', 'シ', 'ス', 'セ', 'ソ', 'タ', 'チ', 'ツ', 'テ', 'ト',
    'ナ', 'ニ', 'ヌ', 'ネ', 'ノ', 'ハ', 'ヒ', 'フ', 'ヘ', 'ホ', 'マ', 'ミ', 'ム', 'メ', 'モ', 'ヤ',
    'ユ', 'ヨ', 'ラ', 'リ', 'ル', 'レ', 'ロ', 'ワ', 'ン', '\u{3099}', '\u{309A}',
];

/// Lucene's CJKWidthFilter: full-width ASCII (U+FF01 to U+FF5E) as ASCII,
/// half-width katakana as full-width, a half-width (semi-)voiced mark
/// joined to the kana before it where Unicode has the pair as one.
#[derive(Clone)]
struct CjkWidth;

impl Rewrite for CjkWidth {
    fn rewrite(&self, text: &mut String) {
        if !text.chars().any(|c| ('\u{FF01}'..='\u{FF9F}').contains(&c)) {
            return;
        }
        let mut folded = String::with_capacity(text.len());
        for c in text.chars() {
            let code = u32::from(c);
            let voiced = match c {
                '\u{FF9E}' => folded.chars().last().and_then(voiced),
                '\u{FF9F}' => folded.chars().last().and_then(semi_voiced),
                _ => None,
            };
            if let Some(voiced) = voiced {
                folded.pop();
                folded.push(voiced);
            } else if (0xFF01..=0xFF5E).contains(&code) {
                folded.extend(char::from_u32(code - 0xFEE0));
            } else if (0xFF65..=0xFF9F).contains(&code) {
                folded.extend(HALF_WIDTH_KANA.get((code - 0xFF65) as usize));
            } else {
                folded.push(c);
            }
        }
        *text = folded;
    }
}

/// The katakana with a dakuten (゛) for `kana`, where Unicode has one.
fn voiced(kana: char) -> Option<char> {
    let step = match kana {
        'ウ' => 78,
        'カ' | 'キ' | 'ク' | 'ケ' | 'コ' | 'サ' | 'シ' | 'ス' | 'セ' | 'ソ' | 'タ' | 'チ'
        | 'ツ' | 'テ' | 'ト' | 'ハ' | 'ヒ' | 'フ' | 'ヘ' | 'ホ' | 'ヽ' => 1,
        'ワ' | 'ヰ' | 'ヱ' | 'ヲ' => 8,
        _ => return None,
    };
    char::from_u32(u32::from(kana) + step)
}

/// The katakana with a handakuten (゜) for `kana`, where Unicode has one.
fn semi_voiced(kana: char) -> Option<char> {
    match kana {
        'ハ' | 'ヒ' | 'フ' | 'ヘ' | 'ホ' => char::from_u32(u32::from(kana) + 2),
        _ => None,
    }
}

/// Chinese, Japanese and Korean letters: Han, Hiragana, Katakana, Hangul
/// (Lucene's StandardTokenizer's IDEOGRAPHIC, HIRAGANA, KATAKANA and
/// HANGUL tokens, which Lucene's CJKBigramFilter joins).
fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        // Han: radicals, iteration and numeral marks, unified and
        // compatibility ideographs, and the supplementary planes' ones.
        0x2E80..=0x2FDF | 0x3005 | 0x3007 | 0x3021..=0x3029 | 0x3038..=0x303B
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3FFFF
        // Hiragana and Katakana (with their marks and extensions).
        | 0x3040..=0x30FF | 0x31F0..=0x31FF | 0x32D0..=0x32FE | 0x3300..=0x3357
        | 0xFF66..=0xFF9F | 0x1B000..=0x1B16F
        // Hangul: jamo, compatibility jamo, syllables, half-width.
        | 0x1100..=0x11FF | 0x3130..=0x318F | 0xA960..=0xA97F | 0xAC00..=0xD7FF
        | 0xFFA0..=0xFFDC)
}

/// Lucene's CJKBigramFilter: a run of Chinese, Japanese or Korean letters
/// (tokens wholly of them, each touching the next) becomes its
/// overlapping pairs of letters, or stays whole if it is one letter;
/// other tokens pass as they are.
#[derive(Clone)]
struct CjkBigrams;

impl TokenFilter for CjkBigrams {
    type Tokenizer<T: Tokenizer> = CjkBigramTokenizer<T>;

    fn transform<T: Tokenizer>(self, inner: T) -> CjkBigramTokenizer<T> {
        CjkBigramTokenizer { inner }
    }
}

#[derive(Clone)]
struct CjkBigramTokenizer<T> {
    inner: T,
}

impl<T: Tokenizer> Tokenizer for CjkBigramTokenizer<T> {
    type TokenStream<'a> = TokenList;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> TokenList {
        let mut stream = self.inner.token_stream(text);
        let mut tokens = Vec::new();
        while stream.advance() {
            tokens.push(stream.token().clone());
        }
        TokenList {
            tokens: bigrams(tokens).into_iter(),
            token: Token::default(),
        }
    }
}

/// A letter of a run of CJK tokens: it, its byte offsets, its token's
/// position.
type Letter = (char, usize, usize, usize);

/// `tokens` with their CJK runs made bigrams. Positions go up by one a
/// bigram within a run, and by what they went up by before elsewhere.
fn bigrams(tokens: Vec<Token>) -> Vec<Token> {
    let mut out = Vec::new();
    let mut run: Vec<Letter> = Vec::new();
    // Positions of the last token taken and the last made (`usize::MAX`
    // before the first, as tantivy's streams start).
    let (mut last_in, mut last_out) = (usize::MAX, usize::MAX);
    for token in tokens {
        let cjk = !token.text.is_empty() && token.text.chars().all(is_cjk);
        let touching = run
            .last()
            .is_some_and(|letter| letter.2 == token.offset_from);
        if !(cjk && touching) {
            flush(&mut run, &mut out, &mut last_in, &mut last_out);
        }
        if cjk {
            // Each letter's own offsets where the text is the source's
            // length, else the token's (as Lucene).
            let exact = token.text.len() == token.offset_to - token.offset_from;
            for (at, c) in token.text.char_indices() {
                run.push(if exact {
                    let from = token.offset_from + at;
                    (c, from, from + c.len_utf8(), token.position)
                } else {
                    (c, token.offset_from, token.offset_to, token.position)
                });
            }
        } else {
            last_out = last_out.wrapping_add(token.position.wrapping_sub(last_in));
            last_in = token.position;
            out.push(Token {
                position: last_out,
                ..token
            });
        }
    }
    flush(&mut run, &mut out, &mut last_in, &mut last_out);
    out
}

/// A run's bigrams (or its one letter) onto `out`, the run emptied.
fn flush(run: &mut Vec<Letter>, out: &mut Vec<Token>, last_in: &mut usize, last_out: &mut usize) {
    let (Some(first), Some(last)) = (run.first().copied(), run.last().copied()) else {
        return;
    };
    *last_out = last_out.wrapping_add(first.3.wrapping_sub(*last_in));
    *last_in = last.3;
    let mut emit = |letters: &[Letter], position: usize| {
        let (Some(from), Some(to)) = (letters.first(), letters.last()) else {
            return;
        };
        out.push(Token {
            offset_from: from.1,
            offset_to: to.2,
            position,
            text: letters.iter().map(|letter| letter.0).collect(),
            position_length: 1,
        });
    };
    if run.len() == 1 {
        emit(run, *last_out);
    } else {
        for (n, pair) in run.windows(2).enumerate() {
            emit(pair, last_out.wrapping_add(n));
        }
        *last_out = last_out.wrapping_add(run.len() - 2);
    }
    run.clear();
}

/// Tokens made beforehand, handed out one by one.
struct TokenList {
    tokens: std::vec::IntoIter<Token>,
    token: Token,
}

impl TokenStream for TokenList {
    fn advance(&mut self) -> bool {
        let Some(token) = self.tokens.next() else {
            return false;
        };
        self.token = token;
        true
    }

    fn token(&self) -> &Token {
        &self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
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
    fn snowball_only_languages_stem_with_frostem() {
        assert_eq!(
            tokens("polish", "Zielone książki leżały na stołach w bibliotekach"),
            ["zielon", "książk", "leż", "na", "stoł", "w", "bibliotek"]
        );
        assert_eq!(
            tokens("czech", "Studenti čtou zajímavé knihy v knihovnách"),
            ["student", "čtou", "zajímav", "knih", "v", "knihovn"]
        );
        assert_eq!(
            tokens("basque", "Etxeetako umeek liburuak irakurtzen"),
            ["etxe", "ume", "liburu", "irakur"]
        );
        assert_eq!(
            tokens("indonesian", "pembelajaran membaca bukunya"),
            ["ajar", "baca", "buku"]
        );
        for name in ["armenian", "hindi", "persian"] {
            assert!(analyzer(name).is_ok(), "{name}");
        }
        // Persian's zero-width non-joiner stays inside the word (Lucene
        // splits there), and the plural goes.
        assert_eq!(tokens("persian", "کتاب\u{200C}ها"), ["کتاب"]);
    }

    #[test]
    fn catalan_and_irish_elide_as_lucene() {
        assert_eq!(
            tokens("catalan", "L'home cantava cançons d’amor"),
            ["hom", "cant", "cançon", "am"]
        );
        // `nAthair` is `n-athair`, the `t` of `t-Uisce` goes, `d'` is
        // elided and Snowball takes the lenition off `fhág`.
        let mut irish = analyzer("irish").unwrap();
        let mut stream = irish.token_stream("nAthair an t-Uisce d'fhág");
        let mut found = Vec::new();
        while stream.advance() {
            found.push((stream.token().text.clone(), stream.token().position));
        }
        assert_eq!(
            found,
            [
                ("athair".to_string(), 0),
                ("an".to_string(), 1),
                ("uisce".to_string(), 3),
                ("fág".to_string(), 4)
            ]
        );
    }

    /// Tokens with their byte offsets and positions.
    fn detailed(name: &str, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut analyzer = analyzer(name).unwrap();
        let mut stream = analyzer.token_stream(text);
        let mut found = Vec::new();
        while stream.advance() {
            let token = stream.token();
            found.push((
                token.text.clone(),
                token.offset_from,
                token.offset_to,
                token.position,
            ));
        }
        found
    }

    #[test]
    fn the_standard_tokenizer_splits_han_and_hiragana_into_letters() {
        // UAX #29: ideographs and hiragana stand alone, katakana and
        // hangul join into words (as Lucene's StandardTokenizer).
        assert_eq!(
            tokens("standard", "一二三 あい カタカナ 한국어"),
            ["一", "二", "三", "あ", "い", "カタカナ", "한국어"]
        );
    }

    #[test]
    fn cjk_makes_bigrams_as_lucenes_cjk_analyzer() {
        // Lucene's TestCJKAnalyzer.
        assert_eq!(
            tokens("cjk", "一二三四五六七八九十"),
            [
                "一二", "二三", "三四", "四五", "五六", "六七", "七八", "八九", "九十"
            ]
        );
        assert_eq!(
            tokens("cjk", "一 二三四 五六七八九 十"),
            ["一", "二三", "三四", "五六", "六七", "七八", "八九", "十"]
        );
        assert_eq!(
            tokens("cjk", "あいうえおabcかきくけこ"),
            [
                "あい", "いう", "うえ", "えお", "abc", "かき", "きく", "くけ", "けこ"
            ]
        );
        assert_eq!(
            tokens("cjk", "あいうえおabんcかきくけ こ"),
            [
                "あい", "いう", "うえ", "えお", "ab", "ん", "c", "かき", "きく", "くけ", "こ"
            ]
        );
        assert_eq!(
            tokens("cjk", "𩬅艱鍟䇹愯瀛"),
            ["𩬅艱", "艱鍟", "鍟䇹", "䇹愯", "愯瀛"]
        );
        assert_eq!(tokens("cjk", "一 روبرت موير"), ["一", "روبرت", "موير"]);
        assert_eq!(tokens("cjk", "一"), ["一"]);
        assert_eq!(tokens("cjk", "あいtest"), ["あい", "test"]);
        assert_eq!(tokens("cjk", "testあい    "), ["test", "あい"]);
        // Katakana and hangul words are cut too; English stop words go.
        assert_eq!(
            tokens("cjk", "パソコン 한국어 The www site"),
            ["パソ", "ソコ", "コン", "한국", "국어", "site"]
        );
        // Offsets (bytes) and positions: one a bigram.
        assert_eq!(
            detailed("cjk", "一 二三四"),
            [
                ("一".to_string(), 0, 3, 0),
                ("二三".to_string(), 4, 10, 1),
                ("三四".to_string(), 7, 13, 2)
            ]
        );
    }

    #[test]
    fn cjk_folds_widths_first() {
        // Full-width ASCII is ASCII, half-width katakana full-width, with
        // the voiced mark joined (ｶﾞ is ガ).
        assert_eq!(
            tokens("cjk", "ＡＢＣ ｶﾞｿﾘﾝ ﾊﾟﾝ"),
            ["abc", "ガソ", "ソリ", "リン", "パン"]
        );
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
        for name in ["nope", "japanese", "thai", "Standard"] {
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
