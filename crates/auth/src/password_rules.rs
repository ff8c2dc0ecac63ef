//! CouchDB's `[chttpd_auth] password_regexp`: patterns every new password
//! must match, each with an optional reason, checked where a password is
//! hashed (so every way a user document is written obeys them).
//!
//! The setting is written as CouchDB reads it, an Erlang list whose items
//! are `{"pattern"}`, `{"pattern", "reason"}` or `"pattern"`, with Erlang's
//! string escapes (`\\` is one backslash). The patterns are regular
//! expressions without look-around or back-references.

use std::sync::{Arc, RwLock};

use regex::Regex;

/// CouchDB's refusal of a password that fails a rule (a rule's reason, if
/// it has one, follows it).
pub const NOT_CONFORMING: &str = "Password does not conform to requirements.";

/// CouchDB's refusal of every password while the setting cannot be read.
pub const CANNOT_HASH: &str = "Server cannot hash passwords at this time.";

/// One rule: a pattern and what to tell a user whose password fails it.
#[derive(Debug, Clone)]
pub struct Rule {
    pattern: Regex,
    reason: Option<String>,
}

/// The rules in force: none, some, or a setting that could not be read.
#[derive(Debug, Clone, Default)]
pub enum PasswordRules {
    #[default]
    None,
    Rules(Arc<Vec<Rule>>),
    /// Why the setting could not be read: every password is refused until
    /// it is mended, as CouchDB refuses them.
    Broken(String),
}

/// Why a password is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordRefusal {
    /// 400: it fails a rule.
    NotConforming(String),
    /// 403: the rules cannot be read.
    CannotHash,
}

impl PasswordRules {
    /// Reads the setting's text (empty: no rules).
    pub fn parse(text: &str) -> PasswordRules {
        if text.trim().is_empty() {
            return PasswordRules::None;
        }
        match parse_rules(text) {
            Ok(rules) if rules.is_empty() => PasswordRules::None,
            Ok(rules) => PasswordRules::Rules(Arc::new(rules)),
            Err(why) => PasswordRules::Broken(why),
        }
    }

    /// Checks a new password against every rule, in order.
    pub fn check(&self, password: &str) -> Result<(), PasswordRefusal> {
        match self {
            PasswordRules::None => Ok(()),
            PasswordRules::Broken(_) => Err(PasswordRefusal::CannotHash),
            PasswordRules::Rules(rules) => {
                for rule in rules.iter() {
                    if !rule.pattern.is_match(password) {
                        // An empty reason is none, as CouchDB reads it.
                        return Err(PasswordRefusal::NotConforming(match &rule.reason {
                            Some(reason) if !reason.is_empty() => {
                                format!("{NOT_CONFORMING} {reason}")
                            }
                            _ => NOT_CONFORMING.to_string(),
                        }));
                    }
                }
                Ok(())
            }
        }
    }
}

static RULES: RwLock<PasswordRules> = RwLock::new(PasswordRules::None);

/// Puts `rules` in force for every password written from now on.
pub fn set_password_rules(rules: PasswordRules) {
    *RULES.write().unwrap_or_else(|p| p.into_inner()) = rules;
}

/// The rules in force.
pub fn password_rules() -> PasswordRules {
    RULES.read().unwrap_or_else(|p| p.into_inner()).clone()
}

fn parse_rules(text: &str) -> Result<Vec<Rule>, String> {
    let mut reader = Reader {
        chars: text.chars().collect(),
        at: 0,
    };
    reader.expect('[')?;
    let mut rules = Vec::new();
    if reader.eat(']') {
        return reader.end().map(|()| rules);
    }
    loop {
        let (pattern, reason) = if reader.eat('{') {
            let pattern = reader.string()?;
            let reason = if reader.eat(',') {
                Some(reader.string()?)
            } else {
                None
            };
            reader.expect('}')?;
            (pattern, reason)
        } else {
            (reader.string()?, None)
        };
        let pattern =
            Regex::new(&pattern).map_err(|e| format!("pattern {pattern:?} is not valid: {e}"))?;
        rules.push(Rule { pattern, reason });
        if reader.eat(']') {
            break;
        }
        reader.expect(',')?;
    }
    reader.end().map(|()| rules)
}

/// Reads an Erlang list of strings and tuples of strings.
struct Reader {
    chars: Vec<char>,
    at: usize,
}

impl Reader {
    fn skip_blank(&mut self) {
        while self.chars.get(self.at).is_some_and(|c| c.is_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_blank();
        if self.chars.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{c}` at character {}", self.at + 1))
        }
    }

    fn end(&mut self) -> Result<(), String> {
        self.skip_blank();
        if self.at == self.chars.len() {
            Ok(())
        } else {
            Err(format!("unexpected text at character {}", self.at + 1))
        }
    }

    /// A double-quoted string with Erlang's escapes.
    fn string(&mut self) -> Result<String, String> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            let Some(&c) = self.chars.get(self.at) else {
                return Err("a string is not closed".into());
            };
            self.at += 1;
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                other => out.push(other),
            }
        }
    }

    /// The character an Erlang escape (after its backslash) stands for.
    fn escape(&mut self) -> Result<char, String> {
        let Some(&c) = self.chars.get(self.at) else {
            return Err("a string ends in a backslash".into());
        };
        self.at += 1;
        Ok(match c {
            'b' => '\u{8}',
            'd' => '\u{7f}',
            'e' => '\u{1b}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            's' => ' ',
            't' => '\t',
            'v' => '\u{b}',
            '0'..='7' => {
                let mut value = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.chars.get(self.at).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            self.at += 1;
                        }
                        None => break,
                    }
                }
                char::from_u32(value).ok_or("an octal escape is not a character")?
            }
            // `\"`, `\\`, `\'` and any other character stand for themselves.
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(rules: &str, password: &str) -> Result<(), PasswordRefusal> {
        PasswordRules::parse(rules).check(password)
    }

    #[test]
    fn every_rule_must_match_and_the_failing_ones_reason_is_told() {
        let rules = r#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}]"#;
        assert_eq!(
            refusal(rules, "short"),
            Err(PasswordRefusal::NotConforming(NOT_CONFORMING.into()))
        );
        assert_eq!(
            refusal(rules, "longbutlower"),
            Err(PasswordRefusal::NotConforming(format!(
                "{NOT_CONFORMING} Requirement 2."
            )))
        );
        assert_eq!(refusal(rules, "LongEnoughX"), Ok(()));
        assert_eq!(
            refusal(r#"[{"[a-z]+", ""}]"#, "UPPER"),
            Err(PasswordRefusal::NotConforming(NOT_CONFORMING.into()))
        );
        // Bare strings are rules too.
        assert!(refusal(r#"[".{3,}"]"#, "ab").is_err());
        assert_eq!(refusal(r#"[ ".{3,}" , {"\\d"} ]"#, "abc1"), Ok(()));
    }

    #[test]
    fn no_setting_is_no_rule_and_a_broken_one_refuses_every_password() {
        assert_eq!(refusal("", "x"), Ok(()));
        assert_eq!(refusal("[]", "x"), Ok(()));
        for broken in ["garbage[", "[{\".*\"", "[\"(\"]", "[{1}]", "[\"a\"] x"] {
            assert!(
                matches!(PasswordRules::parse(broken), PasswordRules::Broken(_)),
                "{broken}"
            );
            assert_eq!(refusal(broken, "x"), Err(PasswordRefusal::CannotHash));
        }
    }

    #[test]
    fn strings_read_erlangs_escapes() {
        // `\d` is Erlang's delete character; `\\d` a digit class.
        assert!(refusal(r#"["\d"]"#, "1").is_err());
        assert_eq!(refusal(r#"["\\d"]"#, "1"), Ok(()));
        assert_eq!(refusal(r#"["a\"b"]"#, "a\"b"), Ok(()));
        assert_eq!(refusal(r#"["\101"]"#, "A"), Ok(()));
    }
}
