//! The web console served at `/_utils`: a few static files (HTML, a script
//! and a style sheet) compiled into the binary, so the console works on a
//! machine with no network and no separate web server. The pages talk to
//! the server's own CouchDB API from the browser.

use std::path::Path;

/// One file of the console.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!("../assets/", $name)),
        }
    };
}

/// Every file of the console; `index.html` is the page.
pub const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
];

/// The file served for `name` (a path below `/_utils/`; empty for the page).
pub fn asset(name: &str) -> Option<Asset> {
    let name = if name.is_empty() { "index.html" } else { name };
    ASSETS.iter().find(|a| a.name == name).copied()
}

/// The file's bytes: the compiled-in ones, or, while developing the
/// console, the same file read from `dev_dir` (only names of the console's
/// own files are ever read, so no path from a request reaches the disk).
pub fn bytes(asset: &Asset, dev_dir: Option<&Path>) -> std::borrow::Cow<'static, [u8]> {
    if let Some(dir) = dev_dir
        && let Ok(bytes) = std::fs::read(dir.join(asset.name))
    {
        return bytes.into();
    }
    asset.bytes.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_files_are_found_and_nothing_else() {
        let page = asset("").expect("the page");
        assert_eq!(page.name, "index.html");
        assert!(std::str::from_utf8(page.bytes).is_ok_and(|t| t.contains("app.js")));
        assert!(asset("app.js").is_some());
        for name in ["../Cargo.toml", "assets/app.js", "/etc/passwd", "nope.js"] {
            assert!(asset(name).is_none(), "{name}");
        }
    }
}
