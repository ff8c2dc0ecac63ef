//! Database names: CouchDB's validation rule and a reversible, safe mapping
//! from a name to a file name in the data folder.

/// CouchDB's longest allowed database name.
pub const MAX_DB_NAME_LEN: usize = 238;

/// System databases that exist outside the user naming rule.
pub const SYSTEM_DATABASES: &[&str] = &["_users", "_replicator", "_global_changes"];

/// The suffix of every database file.
pub const DB_FILE_SUFFIX: &str = ".sqlite";

/// Whether documents written to `name` are replications to run: CouchDB's
/// `_replicator` and any database whose name ends in `/_replicator`.
pub fn is_replicator_db(name: &str) -> bool {
    name == "_replicator" || name.ends_with("/_replicator")
}

/// Whether CouchDB counts `name` a system database (which it will not
/// partition): the system databases, and `_users` or `_replicator` under a
/// prefix.
pub fn is_system_db(name: &str) -> bool {
    SYSTEM_DATABASES.contains(&name) || name.ends_with("/_users") || name.ends_with("/_replicator")
}

/// CouchDB's reason text for an invalid name (shown in 400 `illegal_database_name`).
pub fn illegal_name_reason(name: &str) -> String {
    format!(
        "Name: '{name}'. Only lowercase characters (a-z), digits (0-9), and any of the \
         characters _, $, (, ), +, -, and / are allowed. Must begin with a letter."
    )
}

/// Whether `name` is a valid database name: `^[a-z][a-z0-9_$()+/-]*$`, at
/// most 238 characters, or one of the system databases.
pub fn is_valid_db_name(name: &str) -> bool {
    if SYSTEM_DATABASES.contains(&name) {
        return true;
    }
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_DB_NAME_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|&b| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'_' | b'$' | b'(' | b')' | b'+' | b'-' | b'/')
        })
}

/// The file name of a database: letters, digits, `_` and `-` stay, every
/// other byte becomes `%XX` (so `/` never reaches the file system), plus the
/// suffix. Names are at most 238 bytes, so file names stay within 255.
pub fn file_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + DB_FILE_SUFFIX.len());
    for b in name.bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(DB_FILE_SUFFIX);
    out
}

/// The database name of a file name written by [`file_name`]; `None` for any
/// other file.
pub fn name_from_file(file: &str) -> Option<String> {
    let stem = file.strip_suffix(DB_FILE_SUFFIX)?;
    let mut out = Vec::with_capacity(stem.len());
    let bytes = stem.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = stem.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let name = String::from_utf8(out).ok()?;
    (is_valid_db_name(&name) && file_name(&name) == file).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn couchdb_names_are_accepted_and_others_refused() {
        for ok in [
            "a",
            "db",
            "a1_$()+-/x",
            "_users",
            "_replicator",
            "_global_changes",
            &"a".repeat(238),
        ] {
            assert!(is_valid_db_name(ok), "{ok}");
        }
        for bad in ["", "A", "1db", "_db", "db!", "dé", "_dbs", &"a".repeat(239)] {
            assert!(!is_valid_db_name(bad), "{bad}");
        }
    }

    #[test]
    fn replicator_databases_are_named_for_it() {
        for yes in ["_replicator", "a/_replicator", "a/b/_replicator"] {
            assert!(is_replicator_db(yes) && is_valid_db_name(yes), "{yes}");
        }
        for no in [
            "replicator",
            "a_replicator",
            "_replicator/a",
            "a/_replicators",
        ] {
            assert!(!is_replicator_db(no), "{no}");
        }
    }

    #[test]
    fn file_names_are_safe_and_reversible() {
        for name in ["db", "a/b", "x$(y)+z", "_replicator", "with-dash_and_under"] {
            let file = file_name(name);
            assert!(!file.contains('/'), "{file}");
            assert_eq!(name_from_file(&file).as_deref(), Some(name));
        }
        assert_eq!(file_name("a/b"), "a%2Fb.sqlite");
        assert_eq!(name_from_file("server-uuid"), None);
        assert_eq!(name_from_file("Bad.sqlite"), None);
        assert_eq!(
            name_from_file("a%2fb.sqlite"),
            None,
            "only our own spelling maps back"
        );
    }
}
